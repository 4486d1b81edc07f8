#include "config_settings.h"

#include "hpu/core/app/root.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/compose.h"
#include "hpu/core/config/normalize.h"

namespace hpu::core::app {

RunRequest withSettings(const RunRequest& run, const Settings& settings) {
  RunRequest out = run;
  std::vector<std::string> problems;
  for (const auto& [key, value] : settings)  // read as the command line reads them
    config::applyOverride(out.config, config::rootType(), config::textOverride(key, value, "estimate setting " + key),
                          problems);
  if (problems.empty()) out.config = config::normalize(out.config, config::rootType(), "", problems);
  if (!problems.empty()) throw UsageError(problems.front());
  return out;
}

const config::Node* configAt(const config::Node& root, std::initializer_list<std::string_view> path) {
  const config::Node* n = &root;
  for (std::string_view key : path)
    if (n == nullptr || !(n = n->find(key))) return nullptr;
  return n;
}

}  // namespace hpu::core::app
