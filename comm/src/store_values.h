// Rules shared by every store backend: key and value limits, integer values
// for add(), and the wording of their errors.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hpu::comm::detail {

// CommError when the key is empty or longer than kMaxStoreKeyBytes.
void checkStoreKey(std::string_view key);
// CommError when a value is longer than kMaxStoreValueBytes.
void checkStoreValue(std::string_view key, std::size_t valueBytes);
// current (nullptr: unset, counts as 0) + delta; CommError when current is
// not a decimal integer or the sum overflows.
std::int64_t addToStoredInteger(std::string_view key, const std::string* current, std::int64_t delta);
// "store get 'key' timed out: no rank set it before the deadline"
std::string storeTimeoutMessage(std::string_view operation, std::string_view key);

}  // namespace hpu::comm::detail
