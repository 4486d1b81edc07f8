#include "hpu/comm/elastic_agent.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "../check.h"
#include "../duration_text.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/free_port.h"
#include "hpu/comm/launcher.h"
#include "hpu/comm/rendezvous.h"

namespace hpu::comm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// What the nodes' agents agreed on for a round.
struct Round {
  int number = 0;
  int workerPort = 0;  // 0: the launcher picks one (a single node without MASTER_PORT)
};

// "rank 3: local rank 1 (pid 4242) was killed by signal 9 (Killed)"
std::string describe(const WorkerFailure& f) { return fmt::format("rank {}: {}", f.globalRank, f.description); }

std::string quoted(const std::vector<std::string>& lines) {
  if (lines.empty()) return "; it wrote nothing to stderr";
  std::string text = "; its last lines:";
  for (const auto& line : lines) text += "\n    " + line;
  return text;
}

// The agents of every node meet in a rendezvous of their own and agree on
// the round and the workers' port. Throws RendezvousError naming the nodes
// that did not come.
Round meet(const ElasticOptions& o, int proposal) {
  JoinOptions jo;
  jo.cluster = o.cluster;
  jo.cluster.worldSize = o.cluster.numNodes;
  jo.cluster.globalRank = o.cluster.nodeRank;
  jo.cluster.localRank = 0;
  jo.cluster.localWorldSize = 1;
  jo.cluster.createsProcessesExternally = true;
  jo.settings = o.settings;
  jo.token = o.token;
  jo.version = o.version;
  jo.config = o.config;
  jo.config.entries.emplace_back("elastic.max_restarts", std::to_string(o.maxRestarts));
  std::unique_ptr<ProcessGroup> agents;
  try {
    agents = joinProcessGroup(jo);
  } catch (const RendezvousError& e) {
    throw RendezvousError(fmt::format("node {}: the nodes' launchers did not meet for round {} (their ranks are the "
                                      "node ranks; HPU_RENDEZVOUS_TIMEOUT={}): {}",
                                      o.cluster.nodeRank, proposal, detail::durationText(o.settings.rendezvousTimeout),
                                      e.what()));
  }
  const auto n = static_cast<std::size_t>(o.cluster.numNodes);
  std::vector<std::int32_t> proposals(n);
  const std::int32_t mine = proposal;
  agents->allgather(ConstBufferView(std::as_bytes(std::span<const std::int32_t>(&mine, 1))),
                    BufferView(std::as_writable_bytes(std::span<std::int32_t>(proposals))));
  Round round;
  round.number = *std::max_element(proposals.begin(), proposals.end());
  std::int32_t port = o.cluster.nodeRank == 0 ? pickFreePort(o.cluster.masterAddr) : 0;
  agents->broadcast(BufferView(std::as_writable_bytes(std::span<std::int32_t>(&port, 1))), 0);
  round.workerPort = port;
  return round;
}

}  // namespace

int runElasticAgent(const ElasticOptions& o) {
  HPU_COMM_CHECK(!o.cluster.createsProcessesExternally && o.cluster.localRank == 0 && o.maxRestarts >= 0,
                 "runElasticAgent runs on a node whose processes it creates");
  const bool multiNode = o.cluster.numNodes > 1;
  const std::string node = multiNode ? fmt::format("node {}: ", o.cluster.nodeRank) : "";
  std::vector<std::string> history;  // one line per failed round
  milliseconds backoff = o.settings.restartBackoff;
  int proposal = 0;
  for (;;) {
    const Round round = multiNode ? meet(o, proposal) : Round{proposal, o.cluster.masterPort};
    if (round.number > 0)
      spdlog::info("{}restart {} of {}: starting {} local ranks", node, round.number, o.maxRestarts,
                   o.cluster.localWorldSize);
    LaunchOptions lo;
    lo.cluster = o.cluster;
    lo.cluster.masterPort = round.workerPort;
    lo.env = o.env;
    lo.env.set("HPU_RESTART_COUNT", std::to_string(round.number));
    lo.env.set("HPU_MAX_RESTARTS", std::to_string(o.maxRestarts));
    lo.argv = o.argv;
    lo.executable = o.executable;
    lo.firstLocalRank = 0;
    lo.terminationGrace = o.terminationGrace;
    const auto started = Clock::now();
    int code = 0;
    std::optional<WorkerFailure> failure;
    {
      auto launcher = launchLocalWorkers(lo);
      code = launcher->waitWorkers(Clock::time_point::max());  // as long as the job trains
      failure = launcher->firstFailure();
    }
    if (code == 0) return 0;
    HPU_COMM_CHECK(failure.has_value(), "a round that failed names its first failure");
    const std::string what = describe(*failure);
    const bool final =
        std::find(o.finalExitCodes.begin(), o.finalExitCodes.end(), failure->exitCode) != o.finalExitCodes.end();
    if (final || round.number >= o.maxRestarts) {
      std::string earlier;
      for (const auto& line : history) earlier += "\n  " + line;
      const std::string why =
          final ? fmt::format(", which is not restarted: exit code {} fails the same way again", failure->exitCode)
          : o.maxRestarts == 0
              ? std::string()
              : fmt::format(", and the {} restart{} of trainer.max_restarts are used up", o.maxRestarts,
                            o.maxRestarts == 1 ? "" : "s");
      spdlog::error("{}{}{}{}{}", node, what, why,
                    quoted(failure->lastLines), history.empty() ? "" : "\nearlier rounds:" + earlier);
      return failure->exitCode;
    }
    history.push_back(fmt::format("round {}: {}", round.number, what));
    if (Clock::now() - started >= kStableRound) backoff = o.settings.restartBackoff;
    spdlog::warn("{}{}; restarting every rank from the newest checkpoint in {} (restart {} of {}, "
                 "trainer.max_restarts)",
                 node, what, detail::durationText(backoff), round.number + 1, o.maxRestarts);
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, kMaxRestartBackoff);
    proposal = round.number + 1;
  }
}

}  // namespace hpu::comm
