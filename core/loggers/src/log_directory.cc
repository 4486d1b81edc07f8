#include "log_directory.h"

#include <filesystem>

#include "hpu/core/base/run_versions.h"
#include "hpu/core/strategies/strategy.h"

namespace hpu::core {
namespace {

namespace fs = std::filesystem;

// One past the largest N of the version_N folders in `root` (0 if none).
std::int64_t nextVersion(const fs::path& root) {
  const std::vector<RunVersion> versions = runVersions(root);
  return versions.empty() ? 0 : versions.back().number + 1;
}

}  // namespace

LogDirectory::LogDirectory(const config::Params& p)
    : save_dir_(p.has("save_dir") ? p.getString("save_dir") : ""),
      name_(p.has("name") ? p.getString("name") : ""),
      version_(p.has("version") ? p.node("version").str() : ""),
      version_is_int_(p.has("version") && !p.node("version").quoted()) {}

void LogDirectory::resolve(const std::string& default_root_dir, Strategy& strategy, bool continue_run) {
  if (save_dir_.empty()) save_dir_ = default_root_dir;
  if (!version_.empty()) return;
  std::string next;
  if (strategy.isGlobalZero())
    next = std::to_string(std::max<std::int64_t>(0, nextVersion(fs::path(save_dir_) / name_) - (continue_run ? 1 : 0)));
  version_ = strategy.broadcast(next, 0);
  version_is_int_ = true;
}

std::string LogDirectory::path() const {
  return (fs::path(save_dir_) / name_ / (version_is_int_ ? "version_" + version_ : version_)).string();
}

std::vector<config::ParamSpec> logDirectoryParams() {
  using config::Type;
  return {{"save_dir", Type::optional(Type::string()), "null", "Root directory (default: trainer.default_root_dir)."},
          {"name", Type::optional(Type::string()), "lightning_logs", "Experiment name: the folder under save_dir."},
          {"version", Type::optional(Type::anyOf({Type::integer().min(0), Type::string()})), "null",
           "Version: an int (version_N), a folder name, or null for the next free version_N."}};
}

}  // namespace hpu::core
