// Timeouts of the communication layer, read from the environment:
//
//   HPU_RENDEZVOUS_TIMEOUT  default 300s  how long rank 0 waits for every rank to
//                                         join, and other ranks for rank 0's answer
//   HPU_PEER_TIMEOUT        default 5s    a rank silent this long (killed, frozen,
//                                         unreachable) is declared lost; every other
//                                         rank fails within HPU_PEER_TIMEOUT x 1.2 + 0.1s
//   HPU_COLLECTIVE_TIMEOUT  default 600s  a collective that cannot finish although
//                                         every rank is alive (a rank skipped it)
//   HPU_RESTART_BACKOFF     default 1s    an elastic agent's wait before its first
//                                         restart (elastic_agent.h)
//
// Durations: "300", "300s", "5m", "1500ms", "2.5s". And the collectives' backend:
//
//   HPU_COLLECTIVES         default auto  zmq: this library's algorithms over its own
//                                         transport (shared memory, ipc://, TCP links);
//                                         mpi: Open MPI's collectives (the job started by
//                                         mpirun, a build with MPI); auto: mpi when mpirun
//                                         started the job and the build has MPI, else zmq
//
// Thread-safety: plain values.
#pragma once

#include <chrono>

#include "hpu/comm/process_group.h"
#include "hpu/env/environment.h"

namespace hpu::comm {

enum class CollectivesBackend { kAuto, kZmq, kMpi };

struct CommSettings {
  std::chrono::milliseconds rendezvousTimeout{300'000};
  std::chrono::milliseconds peerTimeout{5'000};
  ProcessGroupOptions group;  // group.timeout is HPU_COLLECTIVE_TIMEOUT
  std::chrono::milliseconds restartBackoff{1'000};
  CollectivesBackend collectives = CollectivesBackend::kAuto;
  // PMIX_RANK is set: mpirun (PMIx) started this process, so Open MPI's
  // collectives can run whatever the cluster environment.
  bool startedByPmix = false;

  // Heartbeats go out five times per peer timeout (at least every 50 ms).
  std::chrono::milliseconds heartbeatInterval() const;
};

// Defaults overridden by the HPU_* variables above (and PMIX_RANK). Throws EnvError naming
// the variable when a value is not a positive duration (HPU_PEER_TIMEOUT
// must be at least 250ms) or not a backend.
CommSettings commSettingsFromEnv(const Environment& env);

}  // namespace hpu::comm
