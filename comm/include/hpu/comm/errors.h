// Errors a user or the cluster can cause in comm/. Every message names the
// rank, the peer or variable involved, and what to change.
//
// CommError
//  ├─ EnvError                 bad cluster variable; raised before any socket opens (CLI: exit 2)
//  ├─ RendezvousError          the job could not assemble (timeout, mismatch, port in use, token)
//  ├─ CommTimeoutError         a collective, store operation or wait passed its deadline
//  ├─ PeerLostError            a rank died, froze, aborted or left while it was needed
//  ├─ CollectiveMismatchError  ranks issued different collectives at the same point
//  └─ LaunchError              local workers could not be started
#pragma once

#include <stdexcept>
#include <string>

namespace hpu::comm {

// Base of every comm/ error.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A cluster-environment variable is missing, malformed or inconsistent.
// Raised before any socket is opened; the CLI maps it to exit code 2.
class EnvError : public CommError {
 public:
  using CommError::CommError;
};

// The rendezvous failed: rank 0 could not listen, a rank was rejected
// (duplicate, world size, version or config mismatch, wrong job token), or
// not every rank arrived before HPU_RENDEZVOUS_TIMEOUT.
class RendezvousError : public CommError {
 public:
  using CommError::CommError;
};

// An operation did not finish before its deadline although every peer was
// still alive (a rank skipped a collective, or the deadline was too short).
class CommTimeoutError : public CommError {
 public:
  using CommError::CommError;
};

// A peer is gone: killed or frozen (no heartbeat within HPU_PEER_TIMEOUT),
// aborted with an error of its own, or left the job while still needed.
class PeerLostError : public CommError {
 public:
  PeerLostError(int rank, const std::string& message) : CommError(message), rank_(rank) {}
  // The global rank that was lost.
  int rank() const { return rank_; }

 private:
  int rank_;
};

// Two ranks issued different collectives (kind, op, dtype, size, root, name
// or sequence number) at the same point; the message names both sides.
class CollectiveMismatchError : public CommError {
 public:
  using CommError::CommError;
};

// The local launcher could not start or supervise its workers.
class LaunchError : public CommError {
 public:
  using CommError::CommError;
};

}  // namespace hpu::comm
