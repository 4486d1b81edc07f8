#include "schema_dump.h"

#include <cmath>

#include "hpu/core/app/root.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/config/yaml_io.h"

namespace hpu::core::config {
namespace {

using nlohmann::json;

bool takesOnlyStrings(const Type& t) { return t.tag() == Type::Tag::kString; }

// A default as Python would hold it once PyYAML read it.
json valueJson(const Node& n, bool as_string) {
  switch (n.kind()) {
    case Node::Kind::kNull:
      return nullptr;
    case Node::Kind::kSequence: {
      json out = json::array();
      for (const Node& item : n.items()) out.push_back(valueJson(item, false));
      return out;
    }
    case Node::Kind::kMap: {
      json out = json::object();
      for (const auto& [key, value] : n.entries()) out[key] = valueJson(value, false);
      return out;
    }
    case Node::Kind::kScalar:
      break;
  }
  const std::string& s = n.str();
  if (n.quoted() || as_string) return s;
  if (isNullScalar(s)) return nullptr;
  if (s == "true" || s == "false") return s == "true";
  if (auto i = parseInt(s)) return *i;
  if (auto f = parseFloat(s)) {
    if (std::isnan(*f)) return ".nan";
    if (std::isinf(*f)) return *f > 0 ? ".inf" : "-.inf";
    return *f;
  }
  return s;
}

constexpr ComponentKind kKinds[] = {
    ComponentKind::kModel,        ComponentKind::kDataModule,     ComponentKind::kOptimizer,
    ComponentKind::kLRScheduler,  ComponentKind::kCallback,       ComponentKind::kLogger,
    ComponentKind::kProfiler,     ComponentKind::kAccelerator,    ComponentKind::kStrategy,
    ComponentKind::kPrecisionPlugin, ComponentKind::kCheckpointIO, ComponentKind::kClusterEnvironment,
    ComponentKind::kLayer};

}  // namespace

json paramsJson(const StructSchema& schema) {
  json out = json::array();
  for (const ParamSpec& p : schema.params) {
    out.push_back({{"name", p.name},
                   {"type", p.type.name()},
                   {"default_yaml", p.default_yaml},
                   {"default", valueJson(p.defaultValue(), takesOnlyStrings(p.type))},
                   {"only_default_because", p.only_default_because},
                   {"own", p.own}});
  }
  return out;
}

json schemaDump() {
  json components = json::array();
  for (ComponentKind kind : kKinds) {
    for (const ComponentSchema* s : SchemaRegistry::instance().list(kind)) {
      components.push_back({{"kind", std::string(kindName(kind))},
                            {"name", s->name},
                            {"module", s->module},
                            {"class_path", s->classPath()},
                            {"stands_in_for", s->stands_in_for},
                            {"short_name", s->short_name},
                            {"init_args", paramsJson(s->init_args)}});
    }
  }
  return {{"trainer", paramsJson(trainerSchema())}, {"components", components}};
}

}  // namespace hpu::core::config
