#include "elastic.h"

#include <random>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "hpu/comm/cluster_environment.h"
#include "hpu/comm/elastic_agent.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/config/params.h"
#include "hpu/core/config/scalars.h"

namespace hpu::core::app {
namespace {

// trainer.max_restarts when the config sets it, else HPU_MAX_RESTARTS, else
// 0; with the name of the setting that decided.
std::pair<int, std::string> maxRestarts(const config::Node& trainer, const Environment& env) {
  if (const config::Node& n = *trainer.find("max_restarts"); !n.isNull())
    return {static_cast<int>(config::asInt(n)), "trainer.max_restarts"};
  if (auto text = env.get("HPU_MAX_RESTARTS")) {
    const auto n = config::parseInt(*text);
    if (!n || *n < 0 || *n > 1'000'000)
      throw UsageError("HPU_MAX_RESTARTS=" + *text + ": expected a number of restarts, 0 or more");
    return {static_cast<int>(*n), "HPU_MAX_RESTARTS"};
  }
  return {0, ""};
}

}  // namespace

int restartRound(const Environment& env) {
  const auto text = env.get("HPU_RESTART_COUNT");
  if (!text) return 0;
  const auto n = config::parseInt(*text);
  if (!n || *n < 0) throw UsageError("HPU_RESTART_COUNT=" + *text + ": expected the restart's number, 0 or more");
  return static_cast<int>(*n);
}

std::optional<int> runElasticAgent(const RunRequest& request, int devices_per_node) {
  if (request.env.contains("HPU_RESTART_COUNT")) return std::nullopt;  // a worker of an agent
  const config::Node& trainer = *request.config.find("trainer");
  const auto [max_restarts, setting] = maxRestarts(trainer, request.env);
  if (max_restarts == 0) return std::nullopt;
  const Environment& env = request.env;
  const comm::Topology topology{devices_per_node, static_cast<int>(config::asInt(*trainer.find("num_nodes")))};
  const comm::ClusterInfo cluster = comm::resolveClusterInfo(env, topology);
  if (cluster.createsProcessesExternally)
    throw UsageError(fmt::format(
        "{}={}: restarts need hpu-train to start this node's ranks itself, but {} started this process (rank {}); "
        "let the tool that started it restart the job (torchrun --max-restarts, srun --requeue), or set {}=0",
        setting, max_restarts, cluster.environment, cluster.globalRank, setting));
  comm::ElasticOptions o;
  o.cluster = cluster;
  o.env = env;
  // Every round's rank 0 proposes the same seed, so a restarted run retraces
  // the first (a seed the config sets needs nothing).
  if (const std::string seed = request.config.find("seed_everything")->str(); !config::parseInt(seed) &&
                                                                             !o.env.contains("PL_GLOBAL_SEED"))
    o.env.set("PL_GLOBAL_SEED", std::to_string(std::random_device{}()));
  o.argv = request.argv;
  o.maxRestarts = max_restarts;
  o.settings = comm::commSettingsFromEnv(env);
  o.token = comm::JobToken::fromEnv(env);
  o.version = request.version;
  o.config.entries = config::flatten(request.config);
  o.finalExitCodes = {2};  // usage and config errors (cli/app.cc)
  spdlog::set_pattern("[launcher] %^%l%$: %v");
  spdlog::info("{}: {} local rank{} as workers, restarted up to {} time{} after a failure", setting,
               cluster.localWorldSize, cluster.localWorldSize == 1 ? "" : "s", max_restarts,
               max_restarts == 1 ? "" : "s");
  return comm::runElasticAgent(o);
}

}  // namespace hpu::core::app
