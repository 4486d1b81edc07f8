#include "hpu/cli/help.h"

#include <algorithm>

#include "hpu/core/app/root.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"

namespace hpu::cli {
namespace {

using namespace hpu::core::config;

// One line per parameter: "--<prefix><name>  type = default" and its doc;
// `dashes` is "" for keys that only a YAML file can give.
void paramLines(std::string& out, const StructSchema& s, const std::string& prefix, int indent,
                const char* dashes = "--") {
  std::size_t width = 0;
  for (const ParamSpec& p : s.params) width = std::max(width, prefix.size() + p.name.size());
  for (const ParamSpec& p : s.params) {
    std::string flag = dashes + prefix + p.name;
    flag.resize(std::max(flag.size(), width + 3), ' ');
    out += std::string(indent, ' ') + flag + "  " + p.type.name() + " = " + p.default_yaml + "\n";
    out += std::string(indent + 6, ' ') + p.doc + (p.only_default_because.empty() ? "" : " [default only]") + "\n";
  }
}

struct Group {
  ComponentKind kind;
  const char* title;
  const char* key;                // where it goes in the config
  const char* prefix = nullptr;   // of its keys: "init_args." (YAML only, no flags); null: "--<key>."
};

// The component kinds the value at dotted `key` of the config may name
// (none when the key takes no class).
std::vector<ComponentKind> componentKindsAt(const std::string& key) {
  const StructSchema* schema = &rootSchema();
  const Type* type = nullptr;
  std::size_t begin = 0;
  while (begin <= key.size()) {
    const std::size_t dot = std::min(key.find('.', begin), key.size());
    if (schema == nullptr) return {};
    const ParamSpec* p = schema->find(key.substr(begin, dot - begin));
    if (p == nullptr) return {};
    type = &p->type;
    schema = type->tag() == Type::Tag::kStruct ? type->schema() : nullptr;
    begin = dot + 1;
  }
  std::vector<ComponentKind> kinds;
  const auto collect = [&](const auto& self, const Type& t) -> void {
    if (t.tag() == Type::Tag::kComponent)
      for (ComponentKind k : t.kinds())
        if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
    for (const Type& a : t.args()) self(self, a);
  };
  if (type != nullptr) collect(collect, *type);
  return kinds;
}

}  // namespace

std::optional<std::string> classHelpRequest(const std::vector<std::string>& extras) {
  static constexpr std::string_view kHelp = ".help";
  for (std::size_t i = 0; i < extras.size(); ++i) {
    if (extras[i].rfind("--", 0) != 0) continue;
    std::string key = extras[i].substr(2), cls;
    if (const auto eq = key.find('='); eq != std::string::npos) {
      cls = key.substr(eq + 1);
      key.resize(eq);
    } else if (i + 1 < extras.size() && extras[i + 1].rfind("--", 0) != 0) {
      cls = extras[i + 1];
    }
    if (key.size() <= kHelp.size() || key.compare(key.size() - kHelp.size(), kHelp.size(), kHelp) != 0) continue;
    key.resize(key.size() - kHelp.size());
    const std::vector<ComponentKind> kinds = componentKindsAt(key);
    if (kinds.empty())
      throw core::UsageError("--" + key + ".help: " + key +
                             " takes no class (keys that do: model, data, optimizer, lr_scheduler, trainer.callbacks, "
                             "trainer.logger, trainer.profiler, trainer.strategy, trainer.accelerator, trainer.plugins)");
    if (cls.empty())
      throw core::UsageError("--" + key + ".help needs a class: --" + key + ".help CLASS" + registeredClasses(kinds));
    const Resolution found = SchemaRegistry::instance().resolve(kinds, cls);
    if (found.schema == nullptr) throw core::UsageError("--" + key + ".help: " + unknownClass(kinds, cls));
    const ComponentSchema& s = *found.schema;
    std::string out = s.classPath() + " (" + std::string(kindName(s.kind)) + "): " + s.doc + "\n";
    if (s.init_args.params.empty()) return out + "  (no init_args)\n";
    out += "Init args: --" + key + ".KEY VALUE, or init_args: {KEY: VALUE} in a config.\n";
    paramLines(out, s.init_args, key + ".", 2);
    return out;
  }
  return std::nullopt;
}

std::string configKeysHelp() {
  std::string out =
      "Config keys: give them in a --config YAML file or as --KEY=VALUE / --KEY VALUE.\n"
      "Components: --model CLASS (or {class_path: CLASS, init_args: {...}}), then --model.KEY.\n\n";
  paramLines(out, rootSchema(), "", 2);
  out += "\nTrainer (trainer.KEY):\n";
  paramLines(out, trainerSchema(), "trainer.", 2);

  static const Group kGroups[] = {
      {ComponentKind::kModel, "Models", "model"},
      {ComponentKind::kLayer, "Layers of a YAML Sequential", "model.init_args.layers: - {class_path: CLASS, init_args: {...}}",
       "init_args."},
      {ComponentKind::kDataModule, "Data modules", "data"},
      {ComponentKind::kOptimizer, "Optimizers", "optimizer"},
      {ComponentKind::kLRScheduler, "LR schedulers", "lr_scheduler"},
      {ComponentKind::kCallback, "Callbacks (--trainer.callbacks+=CLASS, then --trainer.callbacks.KEY)",
       "trainer.callbacks"},
      {ComponentKind::kLogger, "Loggers", "trainer.logger"},
      {ComponentKind::kProfiler, "Profilers", "trainer.profiler"},
      {ComponentKind::kStrategy, "Strategies", "trainer.strategy"},
      {ComponentKind::kAccelerator, "Accelerators", "trainer.accelerator"},
      {ComponentKind::kPrecisionPlugin, "Precision plugins", "trainer.plugins"},
      {ComponentKind::kCheckpointIO, "Checkpoint IO plugins", "trainer.plugins"},
      {ComponentKind::kClusterEnvironment, "Cluster environments", "trainer.plugins"},
  };
  for (const Group& g : kGroups) {
    const auto schemas = SchemaRegistry::instance().list(g.kind);
    if (schemas.empty()) continue;
    out += std::string("\n") + g.title + " (" + g.key + "):\n";
    for (const ComponentSchema* s : schemas) {
      out += "  " + s->name;
      if (!s->module.empty()) out += "  (" + s->classPath() + ")";
      out += "\n      " + s->doc + "\n";
      if (g.prefix != nullptr)
        paramLines(out, s->init_args, g.prefix, 4, "");
      else
        paramLines(out, s->init_args, std::string(g.key) + ".", 4);
    }
  }
  return out;
}

}  // namespace hpu::cli
