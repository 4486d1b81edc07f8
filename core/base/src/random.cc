#include "hpu/core/base/random.h"

#include <cmath>

namespace hpu::core {
namespace {
std::uint64_t splitmix(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

Generator::Generator(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ull);
  for (auto& s : s_) s = splitmix(x);
}

std::uint64_t Generator::below(std::uint64_t n) {
  __uint128_t m = static_cast<__uint128_t>(next()) * n;
  std::uint64_t low = static_cast<std::uint64_t>(m);
  if (low < n) {
    const std::uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<__uint128_t>(next()) * n;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

float Generator::uniform() { return static_cast<float>(next() >> 40) * 0x1.0p-24f; }

float Generator::normal() {
  float u1 = uniform();
  while (u1 <= 0.0f) u1 = uniform();
  const float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2);
}

void Generator::setState(const State& st) {
  for (int i = 0; i < 4; ++i) s_[i] = st.s[i];
}

std::vector<std::int64_t> randomPermutation(std::int64_t n, Generator& g) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[i] = i;
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(g.below(static_cast<std::uint64_t>(i + 1)));
    std::swap(p[i], p[j]);
  }
  return p;
}

}  // namespace hpu::core
