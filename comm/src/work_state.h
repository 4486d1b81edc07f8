// The shared state behind a Work handle: completed once, by the thread that
// ran the operation, with its error if any.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>

namespace hpu::comm::detail {

class WorkState {
 public:
  explicit WorkState(std::string description) : description_(std::move(description)) {}

  // REQUIRES: called once.
  void complete(std::exception_ptr error);
  // Returns when complete (rethrowing the error); CommTimeoutError at `deadline`.
  void wait(std::chrono::steady_clock::time_point deadline) const;
  bool completed() const;
  std::exception_ptr error() const;

 private:
  const std::string description_;
  mutable std::mutex mutex_;
  mutable std::condition_variable done_;
  bool completed_ = false;
  std::exception_ptr error_;
};

}  // namespace hpu::comm::detail
