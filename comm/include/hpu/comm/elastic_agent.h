// Elastic restarts, as torchrun's agent does them (--max-restarts): the
// process the user started runs no rank itself; it starts every local rank
// of its node as a worker, watches them, and when one fails (exits non-zero,
// dies of a signal, loses a peer) stops the others and starts them all again,
// up to maxRestarts times, waiting a backoff before each restart. Workers of
// round K get HPU_RESTART_COUNT=K (0 for the first launch) and
// HPU_MAX_RESTARTS; the trainer resumes a restarted fit from the newest
// complete checkpoint.
//
// Several nodes: every node runs an agent. Before each round the agents meet
// in a rendezvous of their own at MASTER_ADDR:MASTER_PORT (node rank = rank,
// authenticated by the job token, config and restart budget compared), agree
// on the round (the highest any agent proposes, so that an agent started
// again on a lost node learns it) and on the port of the workers' rendezvous,
// which node 0's agent picks. A node that does not come back within
// HPU_RENDEZVOUS_TIMEOUT fails the job, named. Every agent counts the same
// rounds, so the nodes give up together.
//
// SIGINT / SIGTERM reach every worker and end the job without a restart: the
// agent dies of the same signal, as the launcher does.
//
// Thread-safety: runElasticAgent blocks its caller for the whole job; it
// runs one LocalLauncher at a time (one per process, see launcher.h).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "hpu/comm/cluster_info.h"
#include "hpu/comm/comm_settings.h"
#include "hpu/comm/config_fingerprint.h"
#include "hpu/comm/job_token.h"
#include "hpu/env/environment.h"

namespace hpu::comm {

struct ElasticOptions {
  ClusterInfo cluster;  // this node, resolved as its local rank 0 (processes not created externally)
  Environment env;           // the workers' base environment
  std::vector<std::string> argv{};  // empty: this process's own argv
  std::string executable = "/proc/self/exe";
  int maxRestarts = 0;
  CommSettings settings;  // the agents' rendezvous; restartBackoff
  // The agents' rendezvous (several nodes): what every node must agree on.
  JobToken token;
  std::string version;
  ConfigFingerprint config;
  std::chrono::milliseconds terminationGrace{5'000};  // SIGTERM -> SIGKILL for a failed round's workers
  // A worker that exits with one of these fails the job without a restart:
  // it would fail the same way again (the CLI's 2: usage and config errors).
  std::vector<int> finalExitCodes{};
};

// The longest wait between rounds: the backoff doubles with each round that
// failed within kStableRound of its start (a crash loop) up to this, and
// returns to CommSettings::restartBackoff after a round that ran longer.
inline constexpr std::chrono::milliseconds kMaxRestartBackoff{30'000};
inline constexpr std::chrono::milliseconds kStableRound{60'000};

// Runs the job on this node to its end. Returns 0 when every worker of a
// round succeeded, else the exit code of the failure that used up the
// restarts (128 + signal for a signal), after logging it: the rank, how it
// ended and the last lines of its stderr, and the failures of earlier
// rounds. Throws RendezvousError when the nodes' agents cannot meet (the
// message names the missing nodes), LaunchError when workers cannot start.
// REQUIRES: !cluster.createsProcessesExternally, cluster.localRank == 0,
// maxRestarts >= 0, no LocalLauncher alive.
int runElasticAgent(const ElasticOptions& options);

}  // namespace hpu::comm
