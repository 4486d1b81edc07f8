// How a resolved config selects the pipeline's components: by name from the
// strategy and precision tables, or by class path from the registry.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hpu/core/config/node.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/loggers/logger.h"
#include "hpu/core/precision/precision.h"
#include "hpu/core/strategies/strategy.h"
#include "hpu/core/trainer/trainer_options.h"
#include "hpu/env/environment.h"

namespace hpu::core::app {

// Builds a registered component from a canonical node.
template <class Base>
std::unique_ptr<Base> build(const config::Node& node, const std::string& path) {
  return config::ComponentFactory<Base>::instance().create(node, path);
}
// The canonical node of a registered class with `init_args` (scalars, as
// YAML would give them) and its defaults for the rest.
config::Node component(const std::string& class_name, config::ComponentKind kind, const std::string& path,
                       const std::map<std::string, std::string>& init_args = {});
// Builds a registered component by class name with its default init_args.
template <class Base>
std::unique_ptr<Base> buildDefault(const std::string& class_name, config::ComponentKind kind, const std::string& path) {
  return build<Base>(component(class_name, kind, path), path);
}

// The component nodes of a "component or list of components" value.
std::vector<const config::Node*> componentsOf(const config::Node& n);
// The registered name of a canonical component node's class ("ModelCheckpoint").
std::string classOf(const config::Node& component);

// trainer.strategy for `subcommand` on a job of `devices` per node: a name
// from the strategy table or a Strategy class. A DeepSpeed config with
// DeepSpeed-inference's tensor_parallel (tp_size > 1) runs evaluation and
// prediction tensor-parallel (ModelParallelStrategy). Throws UsageError for
// hpu_single on several devices, and for fit with that tensor_parallel.
std::unique_ptr<Strategy> selectStrategy(const TrainerOptions& o, int devices, const std::string& subcommand,
                                         const Environment& env);

// The precision plugin: one named in trainer.plugins, else the strategy's
// own config (DeepSpeed's bf16/fp16), else trainer.precision. Two different
// choices are an error. Under a DeepSpeed strategy it holds the model in the
// half type (forDeepSpeed).
std::unique_ptr<PrecisionPlugin> selectPrecision(const TrainerOptions& o, const Strategy& strategy,
                                                 const Environment& env);

// trainer.logger's loggers, not set up: null (Lightning's default) and true
// mean the default set; fast_dev_run and barebones disable them.
std::vector<std::unique_ptr<Logger>> selectLoggers(const TrainerOptions& o);

}  // namespace hpu::core::app
