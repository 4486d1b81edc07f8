// A key-value store shared by every rank of a job, for coordination (not
// bulk data: values are capped at 1 MiB). Over ZeroMQ it lives in rank 0 and
// rides on the rendezvous connection; the in-memory one serves ranks-as-threads.
// Every call takes a deadline and throws CommTimeoutError when it passes, or
// PeerLostError when rank 0 (the store's host) is gone.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace hpu::comm {

class Store {
 public:
  using Clock = std::chrono::steady_clock;
  using Deadline = Clock::time_point;

  virtual ~Store() = default;
  // Sets `key` to `value` (binary-safe), replacing any previous value.
  virtual void set(std::string_view key, std::string_view value, Deadline deadline) = 0;
  // The value of `key`, waiting until some rank sets it.
  virtual std::string get(std::string_view key, Deadline deadline) = 0;
  // Adds `delta` to the integer (decimal text) at `key`, creating it at 0;
  // returns the new value. Throws CommError when the value is not an integer.
  virtual std::int64_t add(std::string_view key, std::int64_t delta, Deadline deadline) = 0;
  // Returns once every key in `keys` is set.
  virtual void wait(std::span<const std::string> keys, Deadline deadline) = 0;
};

// Largest key and value the store accepts (CommError beyond).
inline constexpr std::size_t kMaxStoreKeyBytes = 4096;
inline constexpr std::size_t kMaxStoreValueBytes = 1 << 20;

// A store in this process's memory, shared by whoever holds the pointer.
std::shared_ptr<Store> makeInMemoryStore();

}  // namespace hpu::comm
