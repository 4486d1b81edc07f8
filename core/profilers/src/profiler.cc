#include "hpu/core/profilers/profiler.h"

#include <spdlog/fmt/fmt.h>

#include <filesystem>

namespace hpu::core {

std::string profilerReportPath(const std::string& dirpath, const std::string& filename, const ProfilerContext& context,
                               std::string_view extension) {
  const std::string dir = dirpath.empty() ? context.log_dir : dirpath;
  std::filesystem::create_directories(dir.empty() ? "." : dir);
  std::string name = filename.empty() ? "" : filename + "-";
  name += fmt::format("rank{}-{}{}", context.rank, context.stage, extension);
  return (std::filesystem::path(dir.empty() ? "." : dir) / name).string();
}

}  // namespace hpu::core
