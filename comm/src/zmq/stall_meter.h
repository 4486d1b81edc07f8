// How long a failure detector's own thread did not run. A detector's loop
// waits in poll for at most a known time; a turn of the loop that took
// longer than that means the thread was not scheduled (an oversubscribed
// host, this process stopped) or was busy with its own work, and silence of
// that excess is not the peers' fault: the detector moves its peers' last
// signs of life forward by it before it judges them.
// Thread-safety: one meter per thread.
#pragma once

#include <chrono>

namespace hpu::comm::detail {

class StallMeter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StallMeter(Clock::time_point start = Clock::now()) : lastTurn_(start) {}

  // Called once per turn, right after the wait returned, with the longest
  // that turn's wait could take: how much of the time since the previous
  // call exceeds it (zero when the thread ran as asked).
  Clock::duration turn(Clock::time_point now, Clock::duration longestWait) {
    const Clock::duration took = now - lastTurn_;
    lastTurn_ = now;
    return took > longestWait ? took - longestWait : Clock::duration::zero();
  }

 private:
  Clock::time_point lastTurn_;
};

}  // namespace hpu::comm::detail
