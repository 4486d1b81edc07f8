// Small text helpers for parsing settings. Thread-safe: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hpu::device::detail {

// s without leading and trailing whitespace.
std::string_view trim(std::string_view s);
// ASCII lower case.
std::string toLower(std::string_view s);
// The fields between separators: "a,,b" -> {"a", "", "b"}; "" -> {""}.
std::vector<std::string_view> split(std::string_view s, char separator);

}  // namespace hpu::device::detail
