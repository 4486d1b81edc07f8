#include "hpu/core/app/root.h"

#include <algorithm>

#include "hpu/core/checkpoint/run_checkpoints.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/loggers/logger.h"
#include "hpu/core/precision/precision.h"
#include "hpu/core/strategies/strategy_names.h"

namespace hpu::core::config {
namespace {
using K = ComponentKind;

// Lightning's GPU strategy names, each mapped to the HPU name it runs as.
std::vector<ForeignSpelling> gpuStrategySpellings() {
  std::vector<ForeignSpelling> out;
  for (const GpuStrategyName& n : gpuStrategyNames())
    out.push_back({{std::string(n.gpu)}, std::string(n.hpu), std::string(n.why)});
  return out;
}

// trainer.strategy's help: the strategy classes of the registry, and the
// families of Lightning's GPU names (ddp*, deepspeed*, fsdp*).
std::string strategyHelp() {
  std::string classes, gpu;
  for (const ComponentSchema* c : SchemaRegistry::instance().list(K::kStrategy))
    classes += (classes.empty() ? "" : ", ") + c->name;
  std::vector<std::string> families;
  for (const GpuStrategyName& n : gpuStrategyNames()) {
    const std::string family(n.gpu.substr(0, n.gpu.find('_')));
    if (std::find(families.begin(), families.end(), family) != families.end()) continue;
    families.push_back(family);
    gpu += (gpu.empty() ? "" : ", ") + family + "*";
  }
  return "Strategy: one of the names, or a Strategy class (" + classes + "); Lightning's " + gpu +
         " names run as their hpu_ counterparts.";
}

std::string defaultLoggerList() {
  std::string out;
  for (const std::string& c : defaultLoggerClasses()) out += (out.empty() ? "" : " + ") + c;
  return out;
}

Type fractionOrCount() { return Type::optional(Type::anyOf({Type::integer().min(0), Type::real().min(0.0).max(1.0)})); }

StructSchema makeTrainer() {
  const Type plugin = Type::component({K::kPrecisionPlugin, K::kCheckpointIO, K::kClusterEnvironment});
  const Type callback = Type::component({K::kCallback});
  const Type logger = Type::component({K::kLogger});
  return StructSchema{
      "trainer",
      "Lightning Trainer arguments.",
      {
          {"accelerator",
           Type::anyOf({Type::string(acceleratorNames(), {{{"gpu", "cuda", "cpu", "mps", "tpu"},
                                                            "",
                                                            "hpu-train runs on the emulated HPU; use auto or hpu"}}),
                        Type::component({K::kAccelerator})}),
           "auto", "Accelerator: auto or hpu (the emulated Gaudi), or an Accelerator class."},
          {"strategy",
           Type::anyOf({Type::string(strategyNameList(), gpuStrategySpellings()), Type::component({K::kStrategy})}),
           "auto", strategyHelp()},
          {"devices",
           Type::anyOf({Type::integer().min(-1), Type::string({"auto"}), Type::list(Type::integer().min(0))}), "auto",
           "Devices per node: a count, -1 or auto for all visible, or a list of device indices."},
          {"num_nodes", Type::integer().min(1), "1", "Number of nodes (machines) in the job."},
          {"precision",
           Type::optional(Type::string(precisionNameList(),
                                       {{{"64", "64-true"}, "", "Gaudi has no float64; use 32-true or a 16-bit precision"}})),
           "null", "Numeric precision: 32-true (null), bf16-mixed, bf16-true, 16-mixed or fp8."},
          {"logger", Type::optional(Type::anyOf({Type::boolean(), logger, Type::list(logger)})), "null",
           "Logger(s): null or true for the default (" + defaultLoggerList() +
               ") under default_root_dir, false for none, or Logger classes."},
          {"callbacks", Type::optional(Type::anyOf({Type::list(callback), callback})), "null",
           "Callbacks to add to the ones the Trainer configures itself."},
          {"fast_dev_run", Type::anyOf({Type::boolean(), Type::integer().min(0)}), "false",
           "Run N (true: 1) batches of train, val and test to find bugs; disables loggers and checkpoints."},
          {"max_epochs", Type::optional(Type::integer().min(-1)), "null",
           "Stop after this many epochs (null: 1000 unless max_steps is set; -1: no limit)."},
          {"min_epochs", Type::optional(Type::integer().min(0)), "null",
           "Train at least this many epochs even if early stopping triggers."},
          {"max_steps", Type::integer().min(-1), "-1", "Stop after this many optimizer steps (-1: no limit)."},
          {"min_steps", Type::optional(Type::integer().min(0)), "null",
           "Train at least this many optimizer steps even if early stopping triggers."},
          {"max_time", Type::optional(Type::anyOf({Type::string(), Type::dict()})), "null",
           "Stop after this wall time: \"DD:HH:MM:SS\" or {days, hours, minutes, seconds}."},
          {"limit_train_batches", fractionOrCount(), "null",
           "Use this fraction (float) or number (int) of train batches per epoch."},
          {"limit_val_batches", fractionOrCount(), "null",
           "Use this fraction (float) or number (int) of validation batches."},
          {"limit_test_batches", fractionOrCount(), "null",
           "Use this fraction (float) or number (int) of test batches."},
          {"limit_predict_batches", fractionOrCount(), "null",
           "Use this fraction (float) or number (int) of predict batches."},
          {"overfit_batches", Type::anyOf({Type::integer().min(0), Type::real().min(0.0).max(1.0)}), "0.0",
           "Train and validate on this many batches (int) or this fraction (float) of the training set, unshuffled, "
           "every epoch (0: off)."},
          {"val_check_interval",
           Type::optional(Type::anyOf({Type::integer().min(1), Type::real().min(0.0, true).max(1.0)})), "null",
           "Validate every N train batches (int) or this fraction of an epoch (float)."},
          {"check_val_every_n_epoch", Type::optional(Type::integer().min(1)), "1",
           "Validate every N epochs (null: only by val_check_interval)."},
          {"num_sanity_val_steps", Type::optional(Type::integer().min(-1)), "null",
           "Validation batches run before training to catch bugs (null: 2; -1: all)."},
          {"log_every_n_steps", Type::optional(Type::integer().min(1)), "null",
           "Log training metrics every N steps (null: 50)."},
          {"enable_checkpointing", Type::optional(Type::boolean()), "null",
           "Add a ModelCheckpoint callback unless one is configured (null: true)."},
          {"enable_progress_bar", Type::optional(Type::boolean()), "null", "Show a progress bar (null: true)."},
          {"enable_model_summary", Type::optional(Type::boolean()), "null",
           "Print a model summary at fit start (null: true)."},
          {"accumulate_grad_batches", Type::integer().min(1), "1",
           "Accumulate gradients over N batches per optimizer step."},
          {"gradient_clip_val", Type::optional(Type::real().min(0.0)), "null",
           "Clip gradients at this value (null: no clipping)."},
          {"gradient_clip_algorithm", Type::optional(Type::string({"norm", "value"})), "null",
           "Clip by global 2-norm (norm, the default) or elementwise value."},
          {"deterministic", Type::optional(Type::anyOf({Type::boolean(), Type::string({"warn"})})), "null",
           "Runs are always reproducible for a given intra-op thread count; true also pins kernels to one thread so "
           "results match on machines with any number of cores (HPU_INTRA_OP_THREADS still wins)."},
          {"benchmark", Type::optional(Type::boolean()), "null",
           "cudnn.benchmark's kernel autotuning; on HPU, lazy mode always caches each compiled graph (recipe) and "
           "reuses it, so every value runs the same."},
          {"inference_mode", Type::boolean(), "true",
           "Evaluate without recording gradients (always true on hpu-train: no autograd tape is recorded outside "
           "training)."},
          {"use_distributed_sampler", Type::boolean(), "true",
           "Split every dataloader across ranks with a DistributedSampler."},
          {"profiler",
           Type::optional(Type::anyOf({Type::string({"simple", "advanced", "pytorch"}), Type::component({K::kProfiler})})),
           "null",
           "Profiler: simple, advanced, pytorch, or a Profiler class (SimpleProfiler, AdvancedProfiler, "
           "PyTorchProfiler, HPUProfiler)."},
          {"detect_anomaly", Type::boolean(), "false",
           "Check every op's output in training's forward and every gradient in backward for nan/inf; fail naming "
           "the first op that produced one."},
          {"barebones", Type::boolean(), "false",
           "Disable every feature that may impact raw speed: loggers, checkpointing, progress bar, model summary, "
           "sanity check (asking for one is an error, as in Lightning)."},
          {"plugins", Type::optional(Type::anyOf({Type::list(plugin), plugin})), "null",
           "Plugins: HPUPrecisionPlugin, HPUCheckpointIO, a ClusterEnvironment."},
          {"sync_batchnorm", Type::boolean(), "false",
           "Batch norms in training use the statistics of every rank's batch together (SyncBatchNorm)."},
          {"reload_dataloaders_every_n_epochs", Type::integer().min(0), "0",
           "Ask the data module for its train and val data again every N epochs (0: never)."},
          {"max_restarts", Type::optional(Type::integer().min(0)), "null",
           "After a rank fails, restart every rank from the newest complete checkpoint, up to N times (torchrun's "
           "--max-restarts; null: HPU_MAX_RESTARTS, else 0).",
           /*only_default_because=*/"", /*own=*/true},
          {"dry_run", Type::boolean(), "false",
           "fit: rehearse the launch on shape-only devices, without data or arithmetic: the rendezvous, process "
           "groups, one optimizer step's collectives (checked to agree across ranks), device memory and checkpoint "
           "names; each node reports its ranks, rank 0 the job, and nothing is written.",
           /*only_default_because=*/"", /*own=*/true},
          {"default_root_dir", Type::optional(Type::string()), "null",
           "Directory for logs and checkpoints when no logger/callback path is given (null: current directory)."},
      }};
}

StructSchema makeRoot() {
  return StructSchema{
      "",
      "",
      {
          {"seed_everything", Type::anyOf({Type::boolean(), Type::integer().min(0).max(4294967295.0)}), "true",
           "Seed for every random generator: an int, true (pick one and save it) or false (unseeded)."},
          {"trainer", Type::structure(&trainerSchema()), "{}", "Trainer arguments."},
          {"model", Type::component({K::kModel}), "null", "The model: a registered Model class and its init_args."},
          {"data", Type::optional(Type::component({K::kDataModule})), "null",
           "The data: a registered DataModule class and its init_args (predict of a language model with its own "
           "prompts needs none)."},
          {"optimizer", Type::optional(Type::component({K::kOptimizer})), "null",
           "Optimizer overriding the model's configure_optimizers (e.g. AdamW)."},
          {"lr_scheduler", Type::optional(Type::component({K::kLRScheduler})), "null",
           "Learning-rate scheduler for the optimizer (e.g. StepLR)."},
          {"ckpt_path", Type::optional(Type::path(config::PathKind::kFile, checkpoint::isRunCheckpointWord)), "null",
           "Checkpoint to resume from (fit) or evaluate (validate/test/predict): a path, 'last' or 'best'."},
      }};
}
}  // namespace

const std::vector<std::string>& acceleratorNames() {
  static const std::vector<std::string> names{"auto", "hpu"};
  return names;
}

const StructSchema& trainerSchema() {
  static const StructSchema s = makeTrainer();
  return s;
}

const StructSchema& rootSchema() {
  static const StructSchema s = makeRoot();
  return s;
}

const Type& rootType() {
  static const Type t = Type::structure(&rootSchema());
  return t;
}

}  // namespace hpu::core::config
