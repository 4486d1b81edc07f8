#include "hpu/cli/help.h"

#include <algorithm>

#include "hpu/core/config/registry.h"
#include "hpu/core/app/root.h"

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
    out += std::string(indent + 6, ' ') + p.doc + (p.only_default ? " [compatibility: default only]" : "") + "\n";
  }
}

struct Group {
  ComponentKind kind;
  const char* title;
  const char* key;                // where it goes in the config
  const char* prefix = nullptr;   // of its keys: "init_args." (YAML only, no flags); null: "--<key>."
};

}  // namespace

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
      if (!s->aliases.empty()) {
        out += "  (also:";
        for (const auto& a : s->aliases) out += " " + a;
        out += ")";
      }
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
