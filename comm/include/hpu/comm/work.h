// A handle on an asynchronous collective queued on a process group's comm
// thread (ProcessGroup::allreduceAsync). Errors raised on the comm thread are
// stored and rethrown by wait().
// Thread-safety: wait() and completed() may be called from any thread; a
// Work may be copied (copies share the operation).
#pragma once

#include <chrono>
#include <memory>

namespace hpu::comm {

namespace detail {
class WorkState;
}

class Work {
 public:
  using Clock = std::chrono::steady_clock;

  // A Work that is already complete (what an empty bucket returns).
  Work();
  explicit Work(std::shared_ptr<detail::WorkState> state);

  // Returns once the operation finished; rethrows its error (PeerLostError,
  // CollectiveMismatchError, ...). Throws CommTimeoutError when `deadline`
  // passes first; the operation itself then still runs to its own timeout.
  void wait(Clock::time_point deadline) const;
  void wait(std::chrono::milliseconds timeout) const { wait(Clock::now() + timeout); }
  // True once the operation finished, successfully or not.
  bool completed() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace hpu::comm
