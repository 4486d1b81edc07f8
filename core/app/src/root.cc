#include "hpu/core/app/root.h"

#include "hpu/core/precision/precision.h"
#include "hpu/core/strategies/strategy_names.h"

namespace hpu::core::config {
namespace {
using K = ComponentKind;

Type fractionOrCount() { return Type::optional(Type::anyOf({Type::integer().min(0), Type::real().min(0.0).max(1.0)})); }

StructSchema makeTrainer() {
  const Type plugin = Type::component({K::kPrecisionPlugin, K::kCheckpointIO, K::kClusterEnvironment});
  const Type callback = Type::component({K::kCallback});
  const Type logger = Type::component({K::kLogger});
  return StructSchema{
      "trainer",
      "Lightning Trainer arguments.",
      {
          {"accelerator", Type::anyOf({Type::string(acceleratorNames()), Type::component({K::kAccelerator})}), "auto",
           "Accelerator: auto (hpu when devices are visible), hpu, cpu, or an Accelerator class."},
          {"strategy", Type::anyOf({Type::string(strategyNameList()), Type::component({K::kStrategy})}), "auto",
           "Strategy: auto, hpu_single, hpu_parallel, hpu_deepspeed[_stage_N[_offload]], or a Strategy class."},
          {"devices",
           Type::anyOf({Type::integer().min(-1), Type::string({"auto"}), Type::list(Type::integer().min(0))}), "auto",
           "Devices per node: a count, -1 or auto for all visible, or a list of device indices."},
          {"num_nodes", Type::integer().min(1), "1", "Number of nodes (machines) in the job."},
          {"precision", Type::string(precisionNameList()), "32-true",
           "Numeric precision: 32-true, bf16-mixed, bf16-true, 16-mixed or fp8."},
          {"logger", Type::optional(Type::anyOf({Type::boolean(), logger, Type::list(logger)})), "true",
           "Logger(s); true uses a CSVLogger under default_root_dir, false disables logging."},
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
          {"overfit_batches", Type::anyOf({Type::integer().min(0), Type::real().min(0.0)}), "0.0",
           "Overfit a subset of train batches.", true},
          {"val_check_interval",
           Type::optional(Type::anyOf({Type::integer().min(1), Type::real().min(0.0, true).max(1.0)})), "null",
           "Validate every N train batches (int) or this fraction of an epoch (float)."},
          {"check_val_every_n_epoch", Type::optional(Type::integer().min(1)), "1",
           "Validate every N epochs (null: only by val_check_interval)."},
          {"num_sanity_val_steps", Type::optional(Type::integer().min(-1)), "2",
           "Validation batches run before training to catch bugs (-1: all)."},
          {"log_every_n_steps", Type::optional(Type::integer().min(1)), "50", "Log training metrics every N steps."},
          {"enable_checkpointing", Type::optional(Type::boolean()), "true",
           "Add a ModelCheckpoint callback unless one is configured."},
          {"enable_progress_bar", Type::optional(Type::boolean()), "true", "Show a progress bar."},
          {"enable_model_summary", Type::optional(Type::boolean()), "true", "Print a model summary at fit start."},
          {"accumulate_grad_batches", Type::integer().min(1), "1",
           "Accumulate gradients over N batches per optimizer step."},
          {"gradient_clip_val", Type::optional(Type::real().min(0.0)), "null",
           "Clip gradients at this value (null: no clipping)."},
          {"gradient_clip_algorithm", Type::optional(Type::string({"norm", "value"})), "null",
           "Clip by global 2-norm (norm, the default) or elementwise value."},
          {"deterministic", Type::optional(Type::anyOf({Type::boolean(), Type::string({"warn"})})), "null",
           "Runs are always reproducible for a given intra-op thread count; true also pins kernels to one thread so "
           "results match on machines with any number of cores (HPU_INTRA_OP_THREADS still wins)."},
          {"benchmark", Type::optional(Type::boolean()), "null", "cudnn.benchmark (no effect on HPU).", true},
          {"inference_mode", Type::boolean(), "true",
           "Evaluate without recording gradients (always true on hpu-train: no autograd tape is recorded outside "
           "training)."},
          {"use_distributed_sampler", Type::boolean(), "true",
           "Split every dataloader across ranks with a DistributedSampler."},
          {"profiler", Type::optional(Type::anyOf({Type::string({"simple"}), Type::component({K::kProfiler})})), "null",
           "Profiler: simple, or a Profiler class (SimpleProfiler, HPUProfiler)."},
          {"detect_anomaly", Type::boolean(), "false", "Anomaly detection for autograd.", true},
          {"barebones", Type::boolean(), "false", "Disable all features that may impact raw speed.", true},
          {"plugins", Type::optional(Type::anyOf({Type::list(plugin), plugin})), "null",
           "Plugins: HPUPrecisionPlugin, HPUCheckpointIO, a ClusterEnvironment."},
          {"sync_batchnorm", Type::boolean(), "false", "Synchronize batch norm statistics across ranks.", true},
          {"reload_dataloaders_every_n_epochs", Type::integer().min(0), "0", "Reload dataloaders every N epochs.",
           true},
          {"max_restarts", Type::optional(Type::integer().min(0)), "null",
           "After a rank fails, restart every rank from the newest complete checkpoint, up to N times (torchrun's "
           "--max-restarts; null: HPU_MAX_RESTARTS, else 0)."},
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
          {"data", Type::component({K::kDataModule}), "null",
           "The data: a registered DataModule class and its init_args."},
          {"optimizer", Type::optional(Type::component({K::kOptimizer})), "null",
           "Optimizer overriding the model's configure_optimizers (e.g. AdamW)."},
          {"lr_scheduler", Type::optional(Type::component({K::kLRScheduler})), "null",
           "Learning-rate scheduler for the optimizer (e.g. StepLR)."},
          {"ckpt_path", Type::optional(Type::string()), "null",
           "Checkpoint to resume from (fit) or evaluate (validate/test/predict): a path, 'last' or 'best'."},
      }};
}
}  // namespace

const std::vector<std::string>& acceleratorNames() {
  static const std::vector<std::string> names{"auto", "hpu", "cpu"};
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
