// MLFlowLogger: Lightning's MLflow logger. tracking_uri picks the store:
// none or file: is MLflow's file store at save_dir (mlflow_file_store.h),
// http:// or https:// a tracking server (mlflow_server_logger.h). MLflow's
// database URIs and Databricks are refused with the alternative.
#include <spdlog/fmt/fmt.h>

#include "hpu/core/config/registry.h"
#include "mlflow_file_store.h"
#include "mlflow_server_logger.h"

namespace hpu::core {
namespace {

using config::Type;

std::unique_ptr<Logger> makeMlflowLogger(const config::Params& p) {
  MlflowSettings s = mlflowSettings(p);
  const std::string& uri = s.tracking_uri;
  if (uri.empty()) return std::make_unique<MlflowFileStore>(std::move(s));
  if (uri.starts_with("file:")) {
    s.save_dir = uri.substr(uri.starts_with("file://") ? 7 : 5);
    return std::make_unique<MlflowFileStore>(std::move(s));
  }
  if (uri.starts_with("http://") || uri.starts_with("https://")) {
    if (uri.find("://") + 3 >= uri.size()) p.fail("tracking_uri", fmt::format("'{}': the URI names no host", uri));
    return makeMlflowServerLogger(std::move(s));
  }
  const std::string scheme = uri.substr(0, uri.find(':'));
  for (const char* database : {"sqlite", "postgresql", "mysql", "mssql"})
    if (scheme.starts_with(database))
      p.fail("tracking_uri",
             fmt::format("'{}': hpu-train does not write MLflow's database directly; serve it with `mlflow server "
                         "--backend-store-uri {} --host 127.0.0.1 --port 5000` and set tracking_uri: "
                         "http://127.0.0.1:5000",
                         uri, uri));
  if (scheme == "databricks")
    p.fail("tracking_uri", fmt::format("'{}': hpu-train does not read Databricks' profiles; log to an MLflow tracking "
                                       "server (tracking_uri: http://HOST:PORT) or to the file store (save_dir)",
                                       uri));
  p.fail("tracking_uri",
         fmt::format("'{}': not a tracking URI hpu-train writes; give http://HOST:PORT or https://HOST (a tracking "
                     "server), a file: URI, or null for the file store at save_dir",
                     uri));
}

HPU_REGISTER_COMPONENT(
    Logger,
    config::ComponentSchema{
        config::ComponentKind::kLogger,
        "MLFlowLogger",
        "lightning.pytorch.loggers",
        {"MLFlowLogger",
         "",
         {{"experiment_name", Type::string(), "lightning_logs", "The experiment: found by name, else created."},
          {"run_name", Type::optional(Type::string()), "null", "The run's name (null: run-<first 8 of its id>)."},
          {"tracking_uri", Type::optional(Type::string()), "null",
           "http://HOST:PORT or https://HOST: an MLflow tracking server; file:DIR or null: the file store."},
          {"tags", Type::optional(Type::dict()), "null", "Tags of the run: {name: value}."},
          {"save_dir", Type::string(), "./mlruns",
           "The file store's directory (also where a tracking server's run goes when the server stays down)."},
          {"log_model", Type::boolean(), "false",
           "Keep the checkpoints that remain at the end as run artifacts, each under <its stem>/."},
          {"prefix", Type::string(), "''", "Prefix of every metric key."},
          {"artifact_location", Type::optional(Type::string()), "null",
           "Artifact location of a new experiment (null: the store's default)."},
          {"run_id", Type::optional(Type::string()), "null", "Resume this run: its metrics are appended to."},
          {"synchronous", Type::optional(Type::boolean()), "null",
           "File store: append each metric as it is logged (true, null) or at the end of the stage (false). Tracking "
           "server: true waits at each checkpoint until the values logged are sent; null, false send in the "
           "background."}}},
        "Logs to an MLflow tracking server or MLflow's file store (mlruns/): params, metrics, tags, the config "
        "and, with log_model, the checkpoints as artifacts, the run's status."},
    makeMlflowLogger);

}  // namespace
}  // namespace hpu::core
