// WandbLogger: registered so that a Lightning config naming it is
// understood, and refused with the reason and the alternative. W&B's offline
// run directory holds a .wandb file (a LevelDB-style log of wandb_internal
// protobuf records whose schema and checks change with their library's
// versions); only their library reads it, so a file written here could not
// be verified to sync. `wandb sync` uploads TensorBoard event files instead.
#include "hpu/core/base/errors.h"
#include "hpu/core/config/registry.h"
#include "hpu/core/loggers/logger.h"

namespace hpu::core {
namespace {

using config::Type;

HPU_REGISTER_COMPONENT(
    Logger,
    config::ComponentSchema{
        config::ComponentKind::kLogger,
        "WandbLogger",
        "lightning.pytorch.loggers",
        {"WandbLogger",
         "",
         {{"name", Type::optional(Type::string()), "null", "Display name of the run."},
          {"save_dir", Type::string(), ".", "Directory of the run's files."},
          {"version", Type::optional(Type::string()), "null", "Run id to resume."},
          {"offline", Type::boolean(), "false", "Write the run locally, to sync later."},
          {"dir", Type::optional(Type::string()), "null", "Same as save_dir."},
          {"id", Type::optional(Type::string()), "null", "Same as version."},
          {"anonymous", Type::optional(Type::boolean()), "null", "Log anonymously."},
          {"project", Type::optional(Type::string()), "null", "The W&B project."},
          {"log_model", Type::anyOf({Type::boolean(), Type::string({"all"})}), "false", "Upload checkpoints."},
          {"experiment", Type::null(), "null", "A wandb Run object to log to.",
           "a W&B Run is a Python object, which a config cannot give"},
          {"prefix", Type::string(), "''", "Prefix of every metric key."},
          {"checkpoint_name", Type::optional(Type::string()), "null", "Name of the model checkpoint artifact."}}},
        "Not supported: refused with the alternative (TensorBoardLogger, then `wandb sync <log_dir>`)."},
    [](const config::Params& p) -> std::unique_ptr<Logger> {
      throw UsageError(
          p.path().substr(0, p.path().rfind('.')) +
          ": WandbLogger is not supported: hpu-train cannot write W&B's offline run format (a .wandb log of their "
          "library's protobuf records, readable and checked only by that library). Use TensorBoardLogger (the "
          "default) and upload its run with `wandb sync lightning_logs/version_N`, which imports TensorBoard event "
          "files; or MLFlowLogger");
    });

}  // namespace
}  // namespace hpu::core
