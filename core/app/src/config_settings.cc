#include "config_settings.h"

#include "hpu/core/app/root.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/compose.h"
#include "hpu/core/config/normalize.h"
#include "hpu/core/config/yaml_io.h"

namespace hpu::core::app {

RunRequest withSettings(const RunRequest& run, const Settings& settings) {
  RunRequest out = run;
  std::vector<std::string> problems;
  for (const auto& [key, value] : settings) {
    // As the command line reads a value: YAML ("null", "[4, 4]"), or text
    // for a key that takes a string.
    config::Override o{key, config::Node::scalar(value), false, value, {}};
    try {
      o.value = config::loadYamlString(value, "estimate setting " + key);
    } catch (const ConfigError& e) {
      o.yaml_problems = e.problems();
    }
    config::applyOverride(out.config, config::rootType(), o, problems);
  }
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
