#include "log_limiter.h"

namespace hpu::comm::detail {
namespace {
constexpr std::chrono::seconds kWindow{10};
constexpr std::size_t kMaxKinds = 1024;
}  // namespace

bool LogLimiter::allow(const std::string& kind, std::size_t& suppressed) {
  const auto now = std::chrono::steady_clock::now();
  if (entries_.size() >= kMaxKinds && !entries_.contains(kind)) entries_.clear();
  auto [it, inserted] = entries_.try_emplace(kind);
  if (!inserted && now - it->second.lastLogged < kWindow) {
    ++it->second.suppressed;
    return false;
  }
  suppressed = it->second.suppressed;
  it->second = Entry{now, 0};
  return true;
}

}  // namespace hpu::comm::detail
