#include "execution_lane.h"

#include "check.h"

namespace hpu::comm::detail {

ExecutionLane::ExecutionLane() : commThread_([this] { commThreadMain(); }) {}

ExecutionLane::~ExecutionLane() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  commThread_.join();
}

void ExecutionLane::submit(std::shared_ptr<LaneTask> task) {
  {
    std::lock_guard lock(mutex_);
    task->scheduled();
    queue_.push_back(std::move(task));
  }
  queued_.notify_all();
}

void ExecutionLane::runNow(LaneTask& task) {
  std::unique_lock lock(mutex_);
  waitForQueue(lock, [&] { return (!running_ && queue_.empty()) || failure_; });
  task.scheduled();
  if (failure_) std::rethrow_exception(failure_);
  const std::exception_ptr error = execute(lock, task);
  lock.unlock();
  if (error) std::rethrow_exception(error);
}

void ExecutionLane::drain() {
  std::unique_lock lock(mutex_);
  waitForQueue(lock, [&] { return !running_ && queue_.empty(); });
}

void ExecutionLane::fail(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = std::move(error);
  }
  idle_.notify_all();
}

std::exception_ptr ExecutionLane::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

template <class Predicate>
void ExecutionLane::waitForQueue(std::unique_lock<std::mutex>& lock, Predicate done) {
  auto pending = runningTimeout_;
  for (const auto& queued : queue_) pending += queued->timeout;
  if (!idle_.wait_until(lock, Clock::now() + pending + std::chrono::seconds(1), done)) {
    HPU_COMM_CHECK(false, "queued collectives overran their own deadlines");
  }
}

std::exception_ptr ExecutionLane::execute(std::unique_lock<std::mutex>& lock, LaneTask& task) {
  running_ = true;
  runningTimeout_ = task.timeout;
  const std::exception_ptr failure = failure_;
  lock.unlock();
  std::exception_ptr error = task.run(failure);
  lock.lock();
  if (error && !failure_) failure_ = error;
  running_ = false;
  runningTimeout_ = {};
  idle_.notify_all();
  if (!queue_.empty()) queued_.notify_all();
  return error;
}

void ExecutionLane::commThreadMain() {
  std::unique_lock lock(mutex_);
  for (;;) {
    queued_.wait(lock, [&] { return (!queue_.empty() && !running_) || (stopping_ && queue_.empty()); });
    if (queue_.empty()) return;
    auto task = std::move(queue_.front());
    queue_.pop_front();
    execute(lock, *task);
  }
}

}  // namespace hpu::comm::detail
