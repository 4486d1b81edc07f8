// The runs of a logger's folder: the version_N folders Lightning's loggers
// number (<save_dir>/<name>/version_N). Reads the file system only;
// thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace hpu::core {

struct RunVersion {
  std::int64_t number;  // N
  std::filesystem::path dir;
};

// The version_N folders directly in `root`, N ascending; none when `root` is
// not a folder that can be read.
std::vector<RunVersion> runVersions(const std::filesystem::path& root);

}  // namespace hpu::core
