#include <string>
#include <vector>

#include <spdlog/fmt/fmt.h>

#include "../duration_text.h"
#include "algorithms.h"
#include "hpu/comm/errors.h"

namespace hpu::comm::detail {
namespace {
constexpr std::chrono::seconds kReportGrace{2};
}  // namespace

void barrierViaRankZero(CollectiveContext& ctx) {
  const int n = ctx.size();
  if (n == 1) return;
  if (ctx.rank() != 0) {
    // Rank 0 knows who is missing: give its timeout report time to arrive
    // before reporting a bare timeout here.
    ctx.send(0, {});
    ctx.recvBy(0, 0, ctx.deadline() + kReportGrace);
    return;
  }
  for (int peer = 1; peer < n; ++peer) {
    try {
      ctx.recv(peer, 0);
    } catch (const CommTimeoutError& e) {
      // Name everyone missing, not just the first: peers whose arrival is
      // already queued are not.
      std::vector<int> missing{peer};
      for (int later = peer + 1; later < n; ++later) {
        try {
          ctx.recvBy(later, 0, Transport::Clock::now());
        } catch (const CommTimeoutError&) {
          missing.push_back(later);
        }
      }
      throw CommTimeoutError(fmt::format("rank 0: {} timed out after {}; missing ranks: {}",
                                         describe(ctx.descriptor()), durationText(ctx.timeout()),
                                         fmt::join(missing, ",")));
    }
  }
  for (int peer = 1; peer < n; ++peer) ctx.send(peer, {});
}

}  // namespace hpu::comm::detail
