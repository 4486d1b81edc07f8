#include "hpu/core/profilers/profiler.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "hpu/core/base/file_io.h"

namespace hpu::core {

std::string profilerReportPath(const std::string& dirpath, const std::string& filename, const ProfilerContext& context,
                               std::string_view extension) {
  const std::string dir = dirpath.empty() ? context.log_dir : dirpath;
  std::filesystem::create_directories(dir.empty() ? "." : dir);
  std::string name = filename.empty() ? "" : filename + "-";
  name += fmt::format("rank{}-{}{}", context.rank, context.stage, extension);
  return (std::filesystem::path(dir.empty() ? "." : dir) / name).string();
}

std::string profilerReport(const ProfilerContext& context,
                           const std::vector<std::pair<std::string, std::string>>& sections) {
  std::string stage = context.stage;
  std::transform(stage.begin(), stage.end(), stage.begin(), ::toupper);
  std::string out = stage + " Profiler Report\n";
  for (const auto& [name, text] : sections) out += "Profile stats for: " + name + "\n" + text;
  return out;
}

void emitProfilerReport(const std::string& dirpath, const std::string& filename, const ProfilerContext& context,
                        const std::string& report) {
  if (!filename.empty()) {
    writeFileAtomically(profilerReportPath(dirpath, filename, context, ".txt"), report);
  } else if (context.rank == 0) {
    std::fputs(report.c_str(), stdout);
    std::fflush(stdout);
  }
}

}  // namespace hpu::core
