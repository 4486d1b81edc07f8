#include "hpu/core/base/run_versions.h"

#include <algorithm>
#include <regex>
#include <string>
#include <system_error>

namespace hpu::core {

std::vector<RunVersion> runVersions(const std::filesystem::path& root) {
  static const std::regex kVersion("version_([0-9]+)");
  std::vector<RunVersion> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && std::regex_match(name, m, kVersion)) out.push_back({std::stoll(m[1]), entry.path()});
  }
  std::sort(out.begin(), out.end(), [](const RunVersion& a, const RunVersion& b) {
    return a.number != b.number ? a.number < b.number : a.dir < b.dir;  // version_01 before version_1
  });
  return out;
}

}  // namespace hpu::core
