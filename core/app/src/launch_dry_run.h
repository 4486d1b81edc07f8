// The launch dry run (`fit --trainer.dry_run=true`): every rank of the job
// runs what fit runs up to and through its first optimizer step, on
// shape-only devices (no data read, no arithmetic, no tensor storage), so
// a launch of many nodes can be wired on one machine before it runs on
// Gaudi cards:
//  - the real rendezvous (config, version, world size and ranks checked,
//    a missing rank named at HPU_RENDEZVOUS_TIMEOUT), the data plane's links,
//    the strategy's process groups, the job's seed;
//  - one optimizer step: its collectives move no tensor data (their buffers
//    have no storage) and are checked to be the same on every rank of each
//    process group (ProcessGroup::checkSchedules), while the few on host
//    values (the seed, the loggers' version) travel for real;
//  - device memory against the device's limit (exceeding it fails as the
//    real run would);
//  - the files the first checkpoint would be written as, in the directory
//    the loggers resolve (version_N chosen by rank 0); loggers are set up
//    (an MLflow tracking server starts a run) but nothing is written.
// Reports go through the job's store: each node's local rank 0 prints one
// line for its ranks, global rank 0 one for the job.
#pragma once

#include "hpu/core/app/run.h"

namespace hpu::core::app {

// Runs the dry run of `request` (fit) on this process's ranks; returns the
// exit code, throws what the run's ranks throw.
int runLaunchDryRun(const RunRequest& request);

}  // namespace hpu::core::app
