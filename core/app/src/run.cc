#include "hpu/core/app/run.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <optional>
#include <random>
#include <thread>

#include "hpu/core/app/failure.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/config/params.h"
#include "hpu/core/config/scalars.h"
#include "hpu/core/ops/autocast.h"
#include "hpu/core/trainer/trainer.h"
#include "hpu/device/cpu_isa.h"
#include "hpu/device/device_table.h"
#include "hpu/device/emulator.h"
#include "hpu/device/spec.h"
#include "hpu/device/platform.h"
#include "hpu/device/threading.h"
#include "elastic.h"
#include "job_end.h"
#include "launch_dry_run.h"
#include "rehearsal.h"
#include "save_config_callback.h"
#include "selection.h"

namespace hpu::core {

namespace {

using app::build;
using app::buildDefault;
using app::classOf;
using app::componentsOf;
using config::ComponentKind;
using config::Node;

std::vector<int> deviceIndices(const Node& devices) {
  std::vector<int> out;
  if (devices.isSequence())
    for (const Node& d : devices.items()) {
      const int i = static_cast<int>(config::asInt(d));
      if (std::find(out.begin(), out.end(), i) != out.end())
        throw UsageError(fmt::format("trainer.devices lists hpu:{} twice", i));
      out.push_back(i);
    }
  return out;
}

int devicesRequested(const Node& devices, const device::Platform& platform) {
  if (devices.isSequence()) return static_cast<int>(devices.items().size());
  if (devices.str() == "auto") return platform.autoDeviceCount();
  const auto n = config::asInt(devices);
  return n == -1 ? platform.autoDeviceCount() : static_cast<int>(n);
}

// HPU_INTRA_OP_THREADS, else 1 with trainer.deterministic: true (the same
// reduction order on any machine), else cores / processes on this node.
int intraOpThreads(const Environment& env, int local_processes, bool deterministic) {
  const auto text = env.get("HPU_INTRA_OP_THREADS");
  if (!text || text->empty()) return deterministic ? 1 : device::defaultIntraOpThreads(local_processes);
  const auto n = config::parseInt(*text);
  if (!n || *n < 1 || *n > 1024)
    throw UsageError("HPU_INTRA_OP_THREADS=" + *text + ": expected a thread count from 1 to 1024");
  return static_cast<int>(*n);
}

// seed_everything's value when the config sets one; nullopt for true and
// false, whose seed the job draws (jobSeed).
std::optional<std::uint64_t> configuredSeed(const Node& cfg) {
  const Node& s = *cfg.find("seed_everything");
  if (s.str() == "false" || s.str() == "true") return std::nullopt;
  return static_cast<std::uint64_t>(config::asInt(s));
}

// The seed this process proposes when the config sets none: a launcher's
// PL_GLOBAL_SEED, else a fresh draw. Only global rank 0's proposal is used.
std::uint64_t proposedSeed(const Environment& env) {
  if (const auto text = env.get("PL_GLOBAL_SEED"))
    if (const auto n = config::parseInt(*text); n && *n >= 0 && *n <= 4294967295ll)
      return static_cast<std::uint64_t>(*n);
  return std::random_device{}();
}

// A data module's tokenizer left null is the model's pretrained directory's,
// as a LightningCLI link_arguments("model.init_args.pretrained",
// "data.init_args.tokenizer") would make it.
Node withPretrainedTokenizer(Node data, const Node& model) {
  Node* args = data.find("init_args");
  Node* tokenizer = args == nullptr ? nullptr : args->find("tokenizer");
  const Node* model_args = model.find("init_args");
  const Node* pretrained = model_args == nullptr ? nullptr : model_args->find("pretrained");
  if (tokenizer != nullptr && tokenizer->isNull() && pretrained != nullptr && !pretrained->isNull())
    *tokenizer = *pretrained;
  return data;
}

// trainer.devices=auto (or -1): says how many devices that is and why, once
// per node; and, when the ranks compute, warns when they outnumber its cores.
void describeDevicesOnNode(const Node& devices, int count, const device::Platform& platform,
                           const Environment& env, bool computes) {
  if (const auto local_rank = env.get("LOCAL_RANK"); local_rank && *local_rank != "0") return;
  const bool automatic = devices.isScalar() && (devices.str() == "auto" || devices.str() == "-1");
  const std::string setting = "trainer.devices=" + (devices.isSequence() ? fmt::format("[{} devices]", count)
                                                                          : devices.str());
  if (automatic) {
    const device::EmulatorSettings& e = platform.settings();
    std::string why = env.contains(device::kDevicesVariable)
                          ? fmt::format("{}={}", device::kDevicesVariable, e.devicesPerNode)
                          : fmt::format("{} unset: the default {}", device::kDevicesVariable, e.devicesPerNode);
    if (e.visibleDevices || e.visibleModules) why += "; visible: " + device::describeVisibility(e);
    spdlog::info("{}: {} emulated {} device{} on this node ({})", setting, count, device::specFor(e.generation).product,
                 count == 1 ? "" : "s", why);
  }
  const unsigned cores = std::thread::hardware_concurrency();
  if (computes && count > 1 && cores > 0 && static_cast<unsigned>(count) > cores)
    spdlog::warn("{}: {} local ranks on a host with {} cores; they share the cores and each runs slower than "
                 "alone (lower trainer.devices, or run on a larger host)",
                 setting, count, cores);
}

}  // namespace

void resolveSeed(config::Node& cfg, const Environment& env) {
  config::Node* seed = cfg.find("seed_everything");
  if (seed == nullptr || !seed->isScalar() || seed->str() != "true") return;
  *seed = config::Node::scalar(std::to_string(proposedSeed(env)), seed->loc());
}

namespace {
void buildParts(const RunRequest& request, Pipeline& pipeline);
}  // namespace

Pipeline buildPipeline(const RunRequest& request, device::Platform& platform, int simulated_rank) {
  const Node& cfg = request.config;
  Pipeline pipeline;
  TrainerParts& parts = pipeline.parts;
  parts.options = TrainerOptions::parse(*cfg.find("trainer"));
  TrainerOptions& o = parts.options;
  const std::optional<std::uint64_t> configured_seed = configuredSeed(cfg);
  parts.seed = configured_seed ? *configured_seed : proposedSeed(request.env);
  parts.config = cfg;

  autocast::installPolicy(autocast::Policy::fromEnv(request.env));

  pipeline.devices = devicesRequested(o.devices, platform);
  const int devices = pipeline.devices;
  const Node& det = *cfg.find("trainer")->find("deterministic");
  device::setIntraOpThreads(intraOpThreads(request.env, devices, det.isScalar() && det.str() == "true"));
  device::setCpuIsa(device::cpuIsaFromEnv(request.env));
  parts.strategy = app::selectStrategy(o, devices, request.subcommand, request.env);
  RunEnvironment run_env{
      request.env,     request.argv,        devices, static_cast<int>(o.num_nodes), deviceIndices(o.devices),
      request.version, config::flatten(cfg)};
  run_env.simulated_rank = simulated_rank;
  parts.strategy->setup(run_env, platform);
  try {
    // seed_everything true or false: one seed for the whole job, global rank
    // 0's, as a launcher exporting PL_GLOBAL_SEED to every rank would give.
    // The rendezvous compared the config with the seed still to be drawn.
    if (!configured_seed && simulated_rank < 0) {
      parts.seed = std::stoull(parts.strategy->broadcast(std::to_string(parts.seed), 0));
      if (Node& seed = *parts.config.find("seed_everything"); seed.str() == "true")
        seed = config::Node::scalar(std::to_string(parts.seed), seed.loc());
    }
    buildParts(request, pipeline);
  } catch (...) {
    app::failJob(*parts.strategy);
  }
  return pipeline;
}

namespace {

// What buildPipeline builds once the strategy is set up.
void buildParts(const RunRequest& request, Pipeline& pipeline) {
  const Node& cfg = request.config;
  TrainerParts& parts = pipeline.parts;
  TrainerOptions& o = parts.options;
  Strategy& strategy = *parts.strategy;
  if (strategy.isGlobalZero())
    for (const std::string& note : request.notes) spdlog::warn("{}", note);

  pipeline.model = build<LightningModule>(*cfg.find("model"), "model");
  if (const Node& data = *cfg.find("data"); !data.isNull())
    pipeline.data = build<data::DataModule>(withPretrainedTokenizer(data, *cfg.find("model")), "data");
  else if (request.subcommand == "predict")
    pipeline.data = data::makeNoDataModule();
  else
    throw UsageError("data: missing; " + request.subcommand +
                     " needs a DataModule class (--data TextDataModule, data: {class_path: ..., init_args: ...}); "
                     "only predict runs without one, on the prompts of the model's init_args");
  TrainingSettings settings{o.accumulate_grad_batches, o.gradient_clip_val};
  strategy.configureTraining(settings, pipeline.data->loaderOptions(data::Split::kTrain).batch_size);
  o.accumulate_grad_batches = settings.accumulate_grad_batches;
  o.gradient_clip_val = settings.gradient_clip_val;
  parts.precision = app::selectPrecision(o, strategy, request.env);
  strategy.usePrecision(parts.precision->precision());
  for (const Node* p : componentsOf(o.plugins))
    if (classOf(*p) == "HPUCheckpointIO") parts.checkpoint_io = build<checkpoint::CheckpointIO>(*p, "trainer.plugins");
  if (const Node& n = *cfg.find("optimizer"); !n.isNull()) parts.optimizer = build<optim::Optimizer>(n, "optimizer");
  if (const Node& n = *cfg.find("lr_scheduler"); !n.isNull()) {
    if (!parts.optimizer)
      throw UsageError("lr_scheduler needs an optimizer from the config too (optimizer: {class_path: Adam, ...})");
    parts.scheduler = build<optim::LRScheduler>(n, "lr_scheduler");
  }
}

}  // namespace

int run(const RunRequest& request) {
  const Node& cfg = request.config;
  device::Platform platform = device::Platform::fromEnv(request.env);
  const Node& devices = *cfg.find("trainer")->find("devices");
  const int devices_per_node = devicesRequested(devices, platform);
  const bool dry_run = config::asBool(*cfg.find("trainer")->find("dry_run"));
  describeDevicesOnNode(devices, devices_per_node, platform, request.env, /*computes=*/!dry_run);
  app::rehearseLayout(request, devices_per_node);
  // A dry run rehearses one launch: no restarts.
  if (dry_run) return app::runLaunchDryRun(request);
  if (auto code = app::runElasticAgent(request, devices_per_node)) return *code;
  Pipeline pipeline = buildPipeline(request, platform, -1);
  TrainerParts& parts = pipeline.parts;
  parts.restart_round = app::restartRound(request.env);
  // Lightning's seed_everything line.
  if (cfg.find("seed_everything")->str() != "false" && parts.strategy->isGlobalZero())
    spdlog::info("Seed set to {}", parts.seed);
  TrainerOptions& o = parts.options;
  Strategy& strategy = *parts.strategy;
  auto& model = pipeline.model;
  auto& data = pipeline.data;

  if (o.barebones && strategy.isGlobalZero())
    spdlog::info(
        "You are running in `Trainer(barebones=True)` mode. All features that may impact raw speed have been disabled "
        "to facilitate analyzing the Trainer overhead. Specifically, the following features are deactivated:\n"
        " - Checkpointing: `Trainer(enable_checkpointing=True)`\n - Progress bar: `Trainer(enable_progress_bar=True)`\n"
        " - Model summary: `Trainer(enable_model_summary=True)`\n - Logging: `Trainer(logger=True)`, "
        "`Trainer(log_every_n_steps>0)`\n - Sanity checking: `Trainer(num_sanity_val_steps>0)`\n"
        " - Development run: `Trainer(fast_dev_run=True)`\n - Anomaly detection: `Trainer(detect_anomaly=True)`\n"
        " - Profiling: `Trainer(profiler=...)`");
  parts.loggers = app::selectLoggers(o);
  for (auto& l : parts.loggers) l->setup(o.default_root_dir, strategy, parts.restart_round > 0, request.env);

  bool has_checkpoint = false, has_progress = false, has_writer = false, has_summary = false;
  const std::vector<const Node*> callbacks = componentsOf(o.callbacks);
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    const Node& c = *callbacks[i];
    const std::string cls = classOf(c);
    has_checkpoint = has_checkpoint || cls == "ModelCheckpoint";
    has_progress = has_progress || cls == "TQDMProgressBar" || cls == "RichProgressBar";
    has_writer = has_writer || cls == "BasePredictionWriter";
    has_summary = has_summary || cls == "ModelSummary" || cls == "RichModelSummary";
    parts.callbacks.push_back(
        build<Callback>(c, o.callbacks.isSequence() ? fmt::format("trainer.callbacks[{}]", i) : "trainer.callbacks"));
  }
  if (request.subcommand == "fit" && !parts.loggers.empty())
    parts.callbacks.push_back(  // a restarted round rewrites its own run's config
        app::makeSaveConfigCallback(parts.config, request.save_config_overwrite || parts.restart_round > 0));
  if (!o.enable_checkpointing && has_checkpoint && o.fast_dev_run == 0)
    throw UsageError(
        "trainer.enable_checkpointing is false but trainer.callbacks has a ModelCheckpoint; remove one of them");
  if (o.enable_checkpointing && !has_checkpoint && request.subcommand == "fit")
    parts.callbacks.push_back(buildDefault<Callback>("ModelCheckpoint", ComponentKind::kCallback, "trainer.callbacks"));
  // predict writes its outputs to the log directory once, at the end.
  if (request.subcommand == "predict" && !has_writer)
    parts.callbacks.push_back(build<Callback>(app::component("BasePredictionWriter", ComponentKind::kCallback,
                                                             "trainer.callbacks", {{"write_interval", "epoch"}}),
                                              "trainer.callbacks"));
  if (o.enable_model_summary && !has_summary && request.subcommand == "fit")
    parts.callbacks.push_back(buildDefault<Callback>("ModelSummary", ComponentKind::kCallback, "trainer.callbacks"));
  if (o.enable_progress_bar && !has_progress)
    parts.callbacks.push_back(buildDefault<Callback>("TQDMProgressBar", ComponentKind::kCallback, "trainer.callbacks"));

  // trainer.profiler: a name (the class's short_name) is its Profiler class
  // with the defaults, as Lightning's.
  if (o.profiler.isScalar())
    parts.profiler = buildDefault<Profiler>(o.profiler.str(), ComponentKind::kProfiler, "trainer.profiler");
  else if (o.profiler.isMap())
    parts.profiler = build<Profiler>(o.profiler, "trainer.profiler");

  const Node& ckpt = *cfg.find("ckpt_path");
  const std::string ckpt_path = ckpt.isNull() ? "" : ckpt.str();
  Trainer trainer(std::move(parts));
  const std::string& sub = request.subcommand;
  try {
    if (sub == "fit") {
      trainer.fit(*model, *data, ckpt_path);
    } else if (sub == "validate") {
      trainer.validate(*model, *data, ckpt_path);
    } else if (sub == "test") {
      trainer.test(*model, *data, ckpt_path);
    } else {
      trainer.predict(*model, *data, ckpt_path);
    }
  } catch (const std::exception& e) {
    trainer.notifyException(e);
    if (trainer.isGlobalZero())
      for (const auto& l : trainer.loggers()) {
        try {
          l->finalize(/*succeeded=*/false);
        } catch (const std::exception& secondary) {
          spdlog::warn("{}", secondary.what());  // the run's own error is the one to report
        }
      }
    app::failJob(trainer.strategy());
  }
  if (const device::ParallelStats threads = device::parallelStats(); threads.steps_alone > 0)
    spdlog::info("intra-op threads: {} of {} steps ran on one thread, measured faster than {} (docs/emulator.md: Threads)",
                 threads.steps_alone, threads.steps, device::intraOpThreads());
  if (trainer.isGlobalZero()) {
    for (std::string part : {trainer.device().graph().summary(), trainer.precision().summary()}) {
      if (part.empty()) continue;
      if (part.back() != '\n') part += '\n';
      std::fputs(part.c_str(), stdout);
    }
    std::fflush(stdout);
  }
  // This process succeeded; a local worker may not have.
  return app::finishJob(trainer.strategy());
}

std::string describeDevices(const Environment& env) {
  return device::formatDeviceTable(device::Platform::fromEnv(env));
}

}  // namespace hpu::core
