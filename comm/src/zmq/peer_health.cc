#include "peer_health.h"

#include "hpu/comm/errors.h"

namespace hpu::comm::detail {

void PeerHealth::report(int rank, PeerDownKind kind, std::string reason) {
  std::lock_guard lock(mutex_);
  reports_.try_emplace(rank, Entry{kind, std::move(reason), Clock::now(), reports_.size()});
  anyReport_.store(true, std::memory_order_release);
}

std::optional<PeerHealth::Report> PeerHealth::firstFailure() const {
  std::lock_guard lock(mutex_);
  const std::pair<const int, Entry>* first = nullptr;
  for (const auto& entry : reports_) {
    if (entry.second.kind == PeerDownKind::kLeft) continue;
    if (first == nullptr || entry.second.order < first->second.order) first = &entry;
  }
  if (first == nullptr) return std::nullopt;
  return Report{first->first, first->second.kind, first->second.reason};
}

void PeerHealth::check(int waitingOn) const {
  if (!anyReport_.load(std::memory_order_acquire)) return;
  if (auto failure = firstFailure()) throw PeerLostError(failure->rank, failure->reason);
  if (waitingOn < 0) return;
  std::lock_guard lock(mutex_);
  auto it = reports_.find(waitingOn);
  if (it != reports_.end() && Clock::now() - it->second.when > leftGrace_) {
    throw PeerLostError(waitingOn, it->second.reason);
  }
}

bool PeerHealth::hasLeft(int rank) const {
  std::lock_guard lock(mutex_);
  auto it = reports_.find(rank);
  return it != reports_.end() && it->second.kind == PeerDownKind::kLeft;
}

}  // namespace hpu::comm::detail
