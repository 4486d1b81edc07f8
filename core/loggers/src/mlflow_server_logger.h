// MLFlowLogger on an MLflow tracking server (tracking_uri: http://HOST:PORT
// or https://...): the experiment found by name or created, a run with its
// name and tags, params, metrics in log-batch requests with their steps and
// timestamps, the config (and with log_model the checkpoints) as artifacts
// through the server's artifact proxy, and the run's status at the end:
// FINISHED, FAILED on an error, KILLED on SIGINT / SIGTERM. Global rank 0
// talks to the server, from a background sender (mlflow_sender.h); every
// rank learns the run's ids.
//
// A server that cannot be reached when the run starts is an error naming
// the URI, before training, unless MLFLOW_TRACKING_OFFLINE=true: then the
// run logs to the local file store (save_dir) and says so.
#pragma once

#include <memory>

#include "mlflow_file_store.h"

namespace hpu::core {

std::unique_ptr<Logger> makeMlflowServerLogger(MlflowSettings settings);

}  // namespace hpu::core
