// Keeps noise from strangers out of the log: the first event of a kind is
// logged, repeats within a 10 s window are counted and reported with the
// next one logged.
// Thread-safety: not thread-safe; one per thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

namespace hpu::comm::detail {

class LogLimiter {
 public:
  // True when an event of `kind` should be logged now; `suppressed` is then
  // set to how many were dropped since the last one logged.
  bool allow(const std::string& kind, std::size_t& suppressed);

 private:
  struct Entry {
    std::chrono::steady_clock::time_point lastLogged;
    std::size_t suppressed = 0;
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace hpu::comm::detail
