#include "hpu/comm/work.h"

#include <spdlog/fmt/fmt.h>

#include "check.h"
#include "hpu/comm/errors.h"
#include "work_state.h"

namespace hpu::comm {
namespace detail {

void WorkState::complete(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    HPU_COMM_CHECK(!completed_, "an operation completed twice");
    completed_ = true;
    error_ = std::move(error);
  }
  done_.notify_all();
}

void WorkState::wait(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(mutex_);
  if (!done_.wait_until(lock, deadline, [&] { return completed_; })) {
    throw CommTimeoutError(fmt::format("{} has not finished by the caller's deadline; it keeps running until its own "
                                       "timeout",
                                       description_));
  }
  if (error_) std::rethrow_exception(error_);
}

bool WorkState::completed() const {
  std::lock_guard lock(mutex_);
  return completed_;
}

std::exception_ptr WorkState::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

}  // namespace detail

Work::Work() : state_(std::make_shared<detail::WorkState>("an empty operation")) { state_->complete(nullptr); }

Work::Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

void Work::wait(Clock::time_point deadline) const { state_->wait(deadline); }

bool Work::completed() const { return state_->completed(); }

}  // namespace hpu::comm
