#include "hpu/core/base/errors.h"

namespace hpu::core {
namespace {
std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    if (!out.empty()) out += '\n';
    out += l;
  }
  return out;
}
}  // namespace

ConfigError::ConfigError(std::vector<std::string> problems)
    : UsageError(join(problems)), problems_(std::move(problems)) {}

}  // namespace hpu::core
