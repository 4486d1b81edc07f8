// What this process knows about the other ranks' health: which are lost
// (no heartbeat within HPU_PEER_TIMEOUT), aborted, or left the job. The
// control client records reports; the data plane checks them while it waits.
//
// Policy: a lost or aborted rank fails every collective of every rank (a
// collective needs all ranks). A rank that left cleanly is waited for a
// little longer (its last messages may still be in flight on another
// connection) and only fails operations that wait on it.
// Thread-safety: all methods are thread-safe; check() is a single atomic
// load when nothing has been reported.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "../wire/control_messages.h"

namespace hpu::comm::detail {

class PeerHealth {
 public:
  using Clock = std::chrono::steady_clock;

  explicit PeerHealth(std::chrono::milliseconds leftGrace) : leftGrace_(leftGrace) {}

  // The first report about a rank wins.
  void report(int rank, PeerDownKind kind, std::string reason);

  // Throws PeerLostError when any rank is lost or aborted, or when `waitingOn`
  // (-1: nobody) left more than the grace period ago.
  void check(int waitingOn = -1) const;

  // The first lost or aborted rank's report, if any.
  struct Report {
    int rank;
    PeerDownKind kind;
    std::string reason;
  };
  std::optional<Report> firstFailure() const;
  bool hasLeft(int rank) const;

 private:
  struct Entry {
    PeerDownKind kind;
    std::string reason;
    Clock::time_point when;
    std::uint64_t order;
  };

  const std::chrono::milliseconds leftGrace_;
  std::atomic<bool> anyReport_{false};
  mutable std::mutex mutex_;
  std::map<int, Entry> reports_;
};

}  // namespace hpu::comm::detail
