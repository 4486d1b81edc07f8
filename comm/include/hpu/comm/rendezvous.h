// Joining a job over ZeroMQ: the rendezvous at global rank 0, then a
// process group whose store lives at rank 0.
//
// Global rank 0 binds MASTER_ADDR:MASTER_PORT (exactly that address). Every
// rank says hello with its rank, world size, data endpoints, program version
// and config fingerprint; rank 0 admits each rank once and rejects
// duplicates, wrong world sizes, version and config mismatches with a reason
// every affected rank raises ("rank 5: config differs from rank 0 at
// trainer.precision: bf16-mixed vs 32-true"). Then it publishes the peer
// table, ranks connect their data plane (ipc:// to ranks of the same node on
// the same machine, tcp:// otherwise), and joinProcessGroup returns. Between
// ranks of the same node, messages travel through shared memory
// (/dev/shm/hpu-train-*, mode 0600) instead, falling back to the socket when
// /dev/shm is full or unavailable.
//
// Security. The job token (job_token.h) authenticates every hello and the
// peer table (HMAC-SHA256 with a key derived from the token). When
// MASTER_ADDR is not a loopback address every socket, rendezvous and data,
// uses CURVE: the server and client key pairs are derived from the token, so
// only token holders complete a handshake; each process's ZAP handler (bound
// before any server socket) admits only the job's client key and logs the
// rest. On loopback the data plane uses a PLAIN password derived from the
// token, checked by the same ZAP handler. Without a token, a loopback
// rendezvous is open to local processes (rank 0 warns) and any other address
// is refused with EnvError before a socket opens.
//
// Failure detection. Every rank and rank 0 exchange heartbeats every
// HPU_PEER_TIMEOUT / 5; a rank silent for HPU_PEER_TIMEOUT is declared lost
// and every rank's pending and later collectives fail with PeerLostError
// naming it, within HPU_PEER_TIMEOUT x 1.2 + 0.1 s of its last heartbeat.
// The report says what rank 0 saw of the silent rank's process when it runs
// on rank 0's host: gone (dead), stopped by a signal (frozen), or alive
// (slow: an overloaded host); on another host it says it cannot see. Rank 0
// never declares itself lost, and silence counts only while the detector's
// own thread runs (a host too busy to run it does not blame the peers).
// The control plane has its own ZeroMQ context and I/O thread, apart from
// the data plane's connections and traffic.
//
// Thread-safety: joinProcessGroup blocks the calling thread until the job
// assembled or failed: at most HPU_RENDEZVOUS_TIMEOUT, plus up to 5 s for a
// rank that rank 0 admitted, so that rank 0's report naming the missing
// ranks reaches it.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "hpu/comm/cluster_info.h"
#include "hpu/comm/comm_settings.h"
#include "hpu/comm/config_fingerprint.h"
#include "hpu/comm/job_token.h"
#include "hpu/comm/process_group.h"

namespace hpu::comm {

struct JoinOptions {
  ClusterInfo cluster;
  CommSettings settings;
  JobToken token;
  std::string version;       // the program version; must be equal on every rank
  ConfigFingerprint config;  // the resolved config; must be equal on every rank
  std::chrono::milliseconds progressInterval{10'000};  // rank 0 logs "k/N ranks joined" this often
  // CURVE on loopback as well (normally only non-loopback traffic is encrypted).
  bool encryptLoopback = false;
};

// One process: a group of size 1 without sockets. Otherwise the rendezvous
// described above. Throws EnvError (no token for a non-loopback address),
// RendezvousError (rejection, timeout, port in use, wrong token).
// REQUIRES: options.cluster.masterPort != 0 when worldSize > 1.
std::unique_ptr<ProcessGroup> joinProcessGroup(const JoinOptions& options);

}  // namespace hpu::comm
