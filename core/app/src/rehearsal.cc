#include "rehearsal.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "hpu/comm/cluster_environment.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/params.h"
#include "hpu/device/emulator.h"
#include "job_trace.h"
#include "log_level_scope.h"

namespace hpu::core::app {
namespace {

data::Stage stageOf(const std::string& subcommand) {
  if (subcommand == "fit") return data::Stage::kFit;
  if (subcommand == "validate") return data::Stage::kValidate;
  if (subcommand == "test") return data::Stage::kTest;
  return data::Stage::kPredict;
}

// Builds global rank `rank`'s pipeline shape-only and sets it up; returns
// the job's pipeline stages.
int rehearseRank(const RunRequest& request, const device::EmulatorSettings& settings, int rank) {
  device::Platform platform(settings);
  Pipeline pipeline = buildPipeline(request, platform, rank);
  const int stages = pipeline.parts.strategy->pipelineStages();
  Trainer trainer(std::move(pipeline.parts));
  trainer.rehearseSetup(*pipeline.model, *pipeline.data, stageOf(request.subcommand));
  return stages;
}

}  // namespace

void rehearseLayout(const RunRequest& request, int devices_per_node) {
  const config::Node& trainer = *request.config.find("trainer");
  const auto nodes = static_cast<int>(config::asInt(*trainer.find("num_nodes")));
  const int world = devices_per_node * nodes;
  if (world <= 1) return;
  if (comm::resolveClusterInfo(request.env, comm::Topology{devices_per_node, nodes}).createsProcessesExternally) return;

  const device::EmulatorSettings settings = traceSettings(device::loadEmulatorSettings(request.env));
  RunRequest quiet = request;
  quiet.notes.clear();  // the ranks warn of them
  std::string stopped;
  const auto start = std::chrono::steady_clock::now();
  try {
    const LogLevelScope logs(spdlog::level::err);  // the ranks say what the parts say
    // The first rank holds the first pipeline stage; the last rank the last
    // stage, and the last shard of every tensor- and expert-parallel split.
    if (rehearseRank(quiet, settings, 0) > 1) rehearseRank(quiet, settings, world - 1);
  } catch (const data::FieldsUndeclared& e) {
    stopped = e.what();  // the ranks read the files
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    // Not a choice of the config's: the ranks meet it themselves, and
    // report it with their rank.
    stopped = e.what();
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  if (!stopped.empty()) spdlog::debug("layout rehearsal stopped early after {:.2f} s: {}", took.count(), stopped);
  else spdlog::debug("layout rehearsal: {:.2f} s", took.count());
}

}  // namespace hpu::core::app
