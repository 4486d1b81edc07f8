#include "store_values.h"

#include <charconv>

#include <spdlog/fmt/fmt.h>

#include "hpu/comm/errors.h"
#include "hpu/comm/store.h"

namespace hpu::comm::detail {

void checkStoreKey(std::string_view key) {
  if (key.empty()) throw CommError("store keys must not be empty");
  if (key.size() > kMaxStoreKeyBytes) {
    throw CommError(fmt::format("store key of {} bytes exceeds the limit of {}", key.size(), kMaxStoreKeyBytes));
  }
}

void checkStoreValue(std::string_view key, std::size_t valueBytes) {
  if (valueBytes > kMaxStoreValueBytes) {
    throw CommError(fmt::format("store value for '{}' has {} bytes, more than the limit of {}; the store is for "
                                "coordination, send bulk data with a collective",
                                key, valueBytes, kMaxStoreValueBytes));
  }
}

std::int64_t addToStoredInteger(std::string_view key, const std::string* current, std::int64_t delta) {
  std::int64_t value = 0;
  if (current != nullptr) {
    auto [end, ec] = std::from_chars(current->data(), current->data() + current->size(), value);
    if (ec != std::errc() || end != current->data() + current->size()) {
      throw CommError(fmt::format("store add '{}': the current value is not an integer", key));
    }
  }
  std::int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum)) {
    throw CommError(fmt::format("store add '{}': {} + {} overflows a 64-bit integer", key, value, delta));
  }
  return sum;
}

std::string storeTimeoutMessage(std::string_view operation, std::string_view key) {
  return fmt::format("store {} '{}' timed out: no rank set it before the deadline", operation, key);
}

}  // namespace hpu::comm::detail
