// Numbers out of JSON that users and other programs write (safetensors
// headers, DeepSpeed configs, fp8 measurement files, the numbers a chat
// template computes). nlohmann's get<Integer>() of a float, get<float>() of a
// double past float's range, and a cast of a double past the integer's range
// convert out of range: undefined behaviour. These refuse such values instead.
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

namespace hpu::core {

// The value as a T when it is a JSON integer (no fraction, no exponent) that T
// holds; nullopt for anything else: 2.0, 1e3, -1 for an unsigned T, a string.
template <std::integral T>
std::optional<T> jsonInteger(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    return std::in_range<T>(u) ? std::optional<T>(static_cast<T>(u)) : std::nullopt;
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    return std::in_range<T>(i) ? std::optional<T>(static_cast<T>(i)) : std::nullopt;
  }
  return std::nullopt;
}

// The array's elements as Ts when it is an array of integers T holds.
template <std::integral T>
std::optional<std::vector<T>> jsonIntegers(const nlohmann::json& v) {
  if (!v.is_array()) return std::nullopt;
  std::vector<T> out;
  out.reserve(v.size());
  for (const auto& e : v) {
    const auto x = jsonInteger<T>(e);
    if (!x) return std::nullopt;
    out.push_back(*x);
  }
  return out;
}

// The value as a T when it is a JSON number T holds (a float: a finite value
// within float's range; nlohmann never parses a non-finite one); nullopt else.
template <std::floating_point T>
std::optional<T> jsonFloat(const nlohmann::json& v) {
  if (!v.is_number()) return std::nullopt;
  const double d = v.get<double>();
  if (std::fabs(d) > static_cast<double>(std::numeric_limits<T>::max())) return std::nullopt;
  return static_cast<T>(d);
}

// `d` truncated toward zero (Python's int() of a float) as a T when T holds
// it; nullopt for NaN, an infinity or a value outside T.
template <std::integral T>
std::optional<T> truncatedInteger(double d) {
  const double t = std::trunc(d);
  // T's range is [min, 2^digits): both bounds are exact doubles, and NaN fails both tests.
  if (!(t >= static_cast<double>(std::numeric_limits<T>::min()) &&
        t < std::ldexp(1.0, std::numeric_limits<T>::digits)))
    return std::nullopt;
  return static_cast<T>(t);
}

}  // namespace hpu::core
