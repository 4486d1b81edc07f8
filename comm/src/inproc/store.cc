// In-memory store: a map under one mutex; waiters sleep on a condition
// variable until their keys appear or their deadline passes.
#include <condition_variable>
#include <map>
#include <mutex>

#include <spdlog/fmt/fmt.h>

#include "../store_values.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/store.h"

namespace hpu::comm {
namespace {

class InMemoryStore final : public Store {
 public:
  void set(std::string_view key, std::string_view value, Deadline) override {
    detail::checkStoreKey(key);
    detail::checkStoreValue(key, value.size());
    {
      std::lock_guard lock(mutex_);
      values_.insert_or_assign(std::string(key), std::string(value));
    }
    changed_.notify_all();
  }

  std::string get(std::string_view key, Deadline deadline) override {
    detail::checkStoreKey(key);
    std::unique_lock lock(mutex_);
    waitFor(lock, key, deadline, "get");
    return values_.find(key)->second;
  }

  std::int64_t add(std::string_view key, std::int64_t delta, Deadline) override {
    detail::checkStoreKey(key);
    std::int64_t result = 0;
    {
      std::lock_guard lock(mutex_);
      auto it = values_.find(key);
      result = detail::addToStoredInteger(key, it == values_.end() ? nullptr : &it->second, delta);
      values_.insert_or_assign(std::string(key), std::to_string(result));
    }
    changed_.notify_all();
    return result;
  }

  void wait(std::span<const std::string> keys, Deadline deadline) override {
    std::unique_lock lock(mutex_);
    for (const auto& key : keys) {
      detail::checkStoreKey(key);
      waitFor(lock, key, deadline, "wait");
    }
  }

 private:
  void waitFor(std::unique_lock<std::mutex>& lock, std::string_view key, Deadline deadline, std::string_view what) {
    if (!changed_.wait_until(lock, deadline, [&] { return values_.contains(key); })) {
      throw CommTimeoutError(detail::storeTimeoutMessage(what, key));
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace

std::shared_ptr<Store> makeInMemoryStore() { return std::make_shared<InMemoryStore>(); }

}  // namespace hpu::comm
