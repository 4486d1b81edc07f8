// The execution lane of a process group and of every group split from it
// (ProcessGroup::split). Their collectives share one transport, which one
// thread at a time may use, so the lane runs them one at a time, in the
// order issued: asynchronous ones queue for the lane's comm thread in
// submission order; a synchronous one waits until nothing is queued or
// running, then runs on the caller's thread. The first error fails the lane:
// every later task of every group sharing it completes with that error
// instead of running.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

namespace hpu::comm::detail {

// One collective as the lane sees it.
class LaneTask {
 public:
  virtual ~LaneTask() = default;
  // Called once, under the lane's lock, when the task's place in the lane's
  // order is fixed: when it is queued (asynchronous) or when it gets the
  // lane (synchronous).
  virtual void scheduled() = 0;
  // Runs the task outside the lane's lock, the only task running. With
  // `failure` set (the lane failed before the task started) it moves no data
  // and completes with that error. Returns its error; null on success.
  virtual std::exception_ptr run(std::exception_ptr failure) = 0;

  // Bounds how long the task holds the lane, so waits behind it are bounded too.
  std::chrono::milliseconds timeout{0};
};

class ExecutionLane {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts the comm thread.
  ExecutionLane();
  // Stops the comm thread. REQUIRES: drain() returned since the last submit.
  ~ExecutionLane();
  ExecutionLane(const ExecutionLane&) = delete;
  ExecutionLane& operator=(const ExecutionLane&) = delete;

  // Queues `task` for the comm thread and returns.
  void submit(std::shared_ptr<LaneTask> task);
  // Runs `task` on the caller's thread once every queued task ran. Rethrows
  // the lane's failure instead of running it, and the task's own error after.
  void runNow(LaneTask& task);
  // Returns once nothing is queued or running, failed or not.
  void drain();
  // Fails the lane with `error` unless it failed already.
  void fail(std::exception_ptr error);
  std::exception_ptr failure() const;

 private:
  // Waits until `done` holds. Every queued or running task is bounded by its
  // timeout, so this wait is too; overrunning them is a bug.
  template <class Predicate>
  void waitForQueue(std::unique_lock<std::mutex>& lock, Predicate done);
  // Runs `task` holding the lane; `lock` is released meanwhile. Returns its error.
  std::exception_ptr execute(std::unique_lock<std::mutex>& lock, LaneTask& task);
  void commThreadMain();

  mutable std::mutex mutex_;
  // Two conditions, so that a synchronous collective wakes no thread: the
  // comm thread waits for work (queued_), callers for the lane to be free
  // (idle_). One condition for both woke the comm thread after every
  // collective: two context switches each, a third of a 4-byte allreduce.
  std::condition_variable queued_;
  std::condition_variable idle_;
  std::deque<std::shared_ptr<LaneTask>> queue_;
  bool running_ = false;  // a task holds the transport
  std::chrono::milliseconds runningTimeout_{0};
  bool stopping_ = false;
  std::exception_ptr failure_;  // the first error; fails every later task
  std::thread commThread_;
};

}  // namespace hpu::comm::detail
