#include "selection.h"

#include <spdlog/fmt/fmt.h>

#include "hpu/core/base/errors.h"
#include "hpu/core/config/normalize.h"
#include "hpu/core/strategies/deepspeed_config.h"
#include "hpu/core/strategies/strategy_names.h"

namespace hpu::core::app {
namespace {

using config::ComponentKind;
using config::Node;

// The cluster environment a trainer.plugins entry forces ("" to detect).
std::string clusterEnvironmentOf(const TrainerOptions& o) {
  for (const Node* p : componentsOf(o.plugins)) {
    const std::string cls = classOf(*p);
    if (cls.find("Environment") != std::string::npos) return cls;
  }
  return "";
}

bool isDeepSpeed(const Node& strategy) {
  if (strategy.isMap()) return classOf(strategy) == "HPUDeepSpeedStrategy";
  const StrategyName* name = findStrategyName(strategy.str());
  return name != nullptr && name->family == StrategyFamily::kDeepSpeed;
}

// HPUDeepSpeedStrategy with the stage and offload a strategy name gives.
Node deepSpeedComponent(const StrategyName& name) {
  const char* offload = name.offload ? "true" : "false";
  const char* offload_parameters = name.offload && name.zero_stage == 3 ? "true" : "false";
  return component("HPUDeepSpeedStrategy", ComponentKind::kStrategy, "trainer.strategy",
                   {{"stage", std::to_string(name.zero_stage)},
                    {"offload_optimizer", offload},
                    {"offload_parameters", offload_parameters}});
}

// HPUDeepSpeedStrategy (`strategy`, its canonical node), or, when its config
// asks for DeepSpeed-inference's tensor_parallel, the tensor-parallel
// strategy with that tp_size over every rank.
std::unique_ptr<Strategy> deepSpeedStrategy(const Node& strategy, int world, const std::string& subcommand,
                                            const Environment& env) {
  const int tp = deepSpeedTensorParallelSize(*strategy.find("init_args"), env);
  if (tp == 1) return build<Strategy>(strategy, "trainer.strategy");
  if (subcommand == "fit")
    throw UsageError(fmt::format(
        "trainer.strategy: the DeepSpeed config's tensor_parallel (tp_size {}) is DeepSpeed-inference's: it serves "
        "predict, validate and test; to train tensor-parallel use ModelParallelStrategy (tensor_parallel_size: {})",
        tp, tp));
  if (world % tp != 0)
    throw UsageError(fmt::format("trainer.strategy: the DeepSpeed config's tensor_parallel.tp_size {} does not divide "
                                 "the world size {} (trainer.devices x trainer.num_nodes)",
                                 tp, world));
  return makeDeepSpeedInferenceStrategy(world / tp, tp);
}

}  // namespace

Node component(const std::string& class_name, ComponentKind kind, const std::string& path,
               const std::map<std::string, std::string>& init_args) {
  Node node = Node::map();
  node.set("class_path", Node::scalar(class_name));
  Node args = Node::map();
  for (const auto& [key, value] : init_args) args.set(key, Node::scalar(value));
  node.set("init_args", args);
  std::vector<std::string> problems;
  return config::normalize(node, config::Type::component({kind}), path, problems);
}

std::vector<const Node*> componentsOf(const Node& n) {
  std::vector<const Node*> out;
  if (n.isSequence())
    for (const Node& i : n.items()) out.push_back(&i);
  else if (n.isMap())
    out.push_back(&n);
  return out;
}

std::string classOf(const Node& component) {
  const std::string& path = component.find("class_path")->str();
  return path.substr(path.rfind('.') + 1);  // a canonical class path ends in the class's name
}

std::unique_ptr<Strategy> selectStrategy(const TrainerOptions& o, int devices, const std::string& subcommand,
                                         const Environment& env) {
  const int world = devices * static_cast<int>(o.num_nodes);
  if (o.strategy.isMap())
    return isDeepSpeed(o.strategy) ? deepSpeedStrategy(o.strategy, world, subcommand, env)
                                   : build<Strategy>(o.strategy, "trainer.strategy");
  // The schema admits only names of the table.
  const StrategyName& name = *findStrategyName(o.strategy.str());
  switch (name.family) {
    case StrategyFamily::kAuto:
      return world == 1 ? makeSingleDeviceStrategy(0) : makeParallelStrategy(25ll << 20, clusterEnvironmentOf(o));
    case StrategyFamily::kSingleDevice:
      if (world > 1)
        throw UsageError(
            fmt::format("trainer.strategy={} runs one device, but trainer.devices x num_nodes = {}; use "
                        "hpu_parallel (or auto)",
                        name.name, world));
      return makeSingleDeviceStrategy(0);
    case StrategyFamily::kParallel:
      return makeParallelStrategy(25ll << 20, clusterEnvironmentOf(o));
    case StrategyFamily::kDeepSpeed:
      return deepSpeedStrategy(deepSpeedComponent(name), world, subcommand, env);
    case StrategyFamily::kFSDP:
      return build<Strategy>(component("HPUFSDPStrategy", ComponentKind::kStrategy, "trainer.strategy",
                                       {{"cpu_offload", name.offload ? "true" : "false"}}),
                             "trainer.strategy");
  }
  throw std::logic_error("unhandled strategy family");
}

namespace {

// The plugin the config chooses, as Lightning's accelerator connector does.
std::unique_ptr<PrecisionPlugin> choosePrecision(const TrainerOptions& o, const Strategy& strategy,
                                                 const Environment& env) {
  const std::string quant_config = env.get("QUANT_CONFIG").value_or("");
  std::unique_ptr<PrecisionPlugin> chosen;
  std::string from = "trainer.precision=" + o.precision;
  for (const Node* p : componentsOf(o.plugins)) {
    const std::string cls = classOf(*p);
    if (cls != "HPUPrecisionPlugin" && cls != "HPUDeepSpeedPrecisionPlugin") continue;
    if (chosen) throw UsageError("trainer.plugins names more than one precision plugin; keep one");
    const std::string given = p->find("init_args")->find("precision")->str();
    if (o.precision != "32-true" && o.precision != given)
      throw UsageError(fmt::format("trainer.precision={} and a {} with precision {} are both given; choose one",
                                   o.precision, cls, given));
    chosen = makePrecisionFromPlugin(*p, "trainer.plugins", o.default_root_dir, isDeepSpeed(o.strategy), quant_config);
    from = cls + "(precision=" + given + ")";
  }
  if (const std::string ds = strategy.configuredPrecision(); !ds.empty()) {
    const std::string current = chosen ? chosen->precision() : o.precision;
    if (current != "32-true" && makePrecisionPlugin(ds)->precision() != makePrecisionPlugin(current)->precision())
      throw UsageError(fmt::format("the DeepSpeed config enables {} but {} is given; choose one", ds, from));
    // The config's bf16/fp16 section governs, with its loss scaler.
    return makePrecisionPlugin(ds, {}, strategy.configuredLossScaler());
  }
  if (chosen) return chosen;
  Fp8Options fp8;
  fp8.default_stats_dir = o.default_root_dir;
  fp8.quant_config = quant_config;
  return makePrecisionPlugin(o.precision, fp8);
}

}  // namespace

std::unique_ptr<PrecisionPlugin> selectPrecision(const TrainerOptions& o, const Strategy& strategy,
                                                 const Environment& env) {
  std::unique_ptr<PrecisionPlugin> plugin = choosePrecision(o, strategy, env);
  return strategy.holdsHalfModel() ? holdingHalfModel(std::move(plugin)) : std::move(plugin);
}

std::vector<std::unique_ptr<Logger>> selectLoggers(const TrainerOptions& o) {
  std::vector<std::unique_ptr<Logger>> loggers;
  if (o.fast_dev_run > 0 || o.barebones) return loggers;
  if (o.logger.isNull() || (o.logger.isScalar() && o.logger.str() == "true"))
    for (const std::string& cls : defaultLoggerClasses())
      loggers.push_back(buildDefault<Logger>(cls, config::ComponentKind::kLogger, "trainer.logger"));
  for (const config::Node* l : componentsOf(o.logger)) loggers.push_back(build<Logger>(*l, "trainer.logger"));
  return loggers;
}

}  // namespace hpu::core::app
