#include "hpu/core/config/registry.h"

#include <algorithm>
#include <stdexcept>

namespace hpu::core::config {

SchemaRegistry& SchemaRegistry::instance() {
  static SchemaRegistry r;
  return r;
}

const ComponentSchema& SchemaRegistry::add(ComponentSchema schema) {
  for (const ComponentSchema& s : schemas_)
    if (s.kind == schema.kind && s.name == schema.name)
      throw std::logic_error("component '" + schema.name + "' registered twice");
  for (const ParamSpec& p : schema.init_args.params) p.defaultValue();  // parse defaults now
  schemas_.push_back(std::move(schema));
  return schemas_.back();
}

const ComponentSchema* SchemaRegistry::resolve(std::span<const ComponentKind> kinds,
                                               std::string_view name) const {
  for (const ComponentSchema& s : schemas_) {
    if (std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end()) continue;
    if (s.name == name) return &s;
    for (const auto& a : s.aliases)
      if (a == name) return &s;
  }
  return nullptr;
}

std::vector<const ComponentSchema*> SchemaRegistry::list(ComponentKind kind) const {
  std::vector<const ComponentSchema*> out;
  for (const ComponentSchema& s : schemas_)
    if (s.kind == kind) out.push_back(&s);
  std::sort(out.begin(), out.end(),
            [](const ComponentSchema* a, const ComponentSchema* b) { return a->name < b->name; });
  return out;
}

std::vector<std::string> SchemaRegistry::names(std::span<const ComponentKind> kinds) const {
  std::vector<std::string> out;
  for (const ComponentSchema& s : schemas_) {
    if (std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end()) continue;
    out.push_back(s.name);
    out.insert(out.end(), s.aliases.begin(), s.aliases.end());
  }
  return out;
}

}  // namespace hpu::core::config
