#include "hpu/core/config/registry.h"

#include <algorithm>
#include <stdexcept>

#include "hpu/core/config/scalars.h"

namespace hpu::core::config {
namespace {

// The packages under which a dotted path ending in a class's name names it:
// Lightning (both distributions, Fabric's environments), lightning-habana,
// torch (optimizers, schedulers, layers, checkpointing), and the libraries
// whose classes hpu-train implements (Hugging Face models, DeepSpeed's
// schedules, Lightning Bolts' data modules), and `__main__`: the script that
// ran LightningCLI, whose own classes it prints as __main__.<Class>.
constexpr std::string_view kPackages[] = {
    "lightning.pytorch", "pytorch_lightning", "lightning.fabric", "lightning_fabric", "lightning_habana",
    "torch",             "transformers",      "deepspeed",        "pl_bolts",
    "__main__"};

bool ofKinds(const ComponentSchema& s, std::span<const ComponentKind> kinds) {
  return std::find(kinds.begin(), kinds.end(), s.kind) != kinds.end();
}

// The last component of a class path, and whether the rest may name a class.
std::pair<std::string_view, bool> nameOf(std::string_view class_path) {
  const auto dot = class_path.rfind('.');
  if (dot == std::string_view::npos) return {class_path, true};
  return {class_path.substr(dot + 1), underClassPathPackage(class_path.substr(0, dot))};
}

}  // namespace

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

Resolution SchemaRegistry::resolve(std::span<const ComponentKind> kinds, std::string_view class_path) const {
  const auto [name, by_rule] = nameOf(class_path);
  for (const ComponentSchema& s : schemas_) {
    if (!ofKinds(s, kinds)) continue;
    if (class_path == s.classPath() || (by_rule && name == s.name) || (!s.short_name.empty() && class_path == s.short_name))
      return {&s, false};
  }
  for (const ComponentSchema& s : schemas_) {
    if (!ofKinds(s, kinds)) continue;
    for (const std::string& other : s.stands_in_for)
      if (class_path == other || (by_rule && name == nameOf(other).first)) return {&s, true};
  }
  return {};
}

std::vector<const ComponentSchema*> SchemaRegistry::list(ComponentKind kind) const {
  std::vector<const ComponentSchema*> out;
  for (const ComponentSchema& s : schemas_)
    if (s.kind == kind) out.push_back(&s);
  std::sort(out.begin(), out.end(),
            [](const ComponentSchema* a, const ComponentSchema* b) { return a->name < b->name; });
  return out;
}

std::vector<std::string> SchemaRegistry::closeMatches(std::span<const ComponentKind> kinds,
                                                      std::string_view class_path) const {
  std::vector<std::string> names, paths;
  for (const ComponentSchema& s : schemas_) {
    if (!ofKinds(s, kinds)) continue;
    names.push_back(s.name);
    paths.push_back(s.classPath());
  }
  std::vector<std::string> out;
  for (std::size_t i : config::closeMatches(nameOf(class_path).first, names, names.size()))
    if (out.size() < 3 && std::find(out.begin(), out.end(), paths[i]) == out.end()) out.push_back(paths[i]);
  return out;
}

bool underClassPathPackage(std::string_view module) {
  return std::any_of(std::begin(kPackages), std::end(kPackages), [&](std::string_view p) {
    return module == p || (module.size() > p.size() && module.substr(0, p.size()) == p && module[p.size()] == '.');
  });
}

std::string classPathPackages() {
  std::string out;
  for (std::string_view p : kPackages) out += (out.empty() ? "" : ", ") + std::string(p);
  return out;
}

std::string kindNames(std::span<const ComponentKind> kinds) {
  std::string out;
  for (ComponentKind k : kinds) out += (out.empty() ? "" : " or ") + std::string(kindName(k));
  return out;
}

std::string registeredClasses(std::span<const ComponentKind> kinds) {
  std::string list;
  for (ComponentKind k : kinds)
    for (const ComponentSchema* s : SchemaRegistry::instance().list(k)) list += (list.empty() ? "" : ", ") + s->name;
  return list.empty() ? "" : " (registered: " + list + ")";
}

std::string unknownClass(std::span<const ComponentKind> kinds, const std::string& class_path) {
  std::string out = "unknown " + kindNames(kinds) + " class '" + class_path + "'";
  if (const auto dot = class_path.rfind('.');
      dot != std::string::npos && !underClassPathPackage(std::string_view(class_path).substr(0, dot)))
    out += "; class paths resolve under " + classPathPackages();
  const auto near = SchemaRegistry::instance().closeMatches(kinds, class_path);
  if (near.empty()) return out + registeredClasses(kinds);
  out += near.size() == 1 ? "; did you mean " : "; close matches: ";
  for (std::size_t i = 0; i < near.size(); ++i) out += (i ? ", '" : "'") + near[i] + "'";
  return out + (near.size() == 1 ? "?" : "");
}

}  // namespace hpu::core::config
