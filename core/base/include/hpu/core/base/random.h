// Deterministic random numbers. Every stream is a pure function of
// (seed, stream id), so results do not depend on thread or process count.
// A Generator is not thread-safe; give each thread its own stream.
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <vector>

namespace hpu::core {

// Well-known stream ids, so that adding a consumer never shifts another's numbers.
enum class RandomStream : std::uint64_t {
  kInit = 1,      // parameter initialisation
  kShuffle = 2,   // per-epoch sample permutation (xor'd with the epoch)
  kDropout = 3,   // dropout masks
  kSplit = 4,     // train/validation split
  kData = 5,      // synthetic data sets
  kSampling = 6,  // generation's sampling of tokens
};

// xoshiro256** seeded through splitmix64.
class Generator {
 public:
  explicit Generator(std::uint64_t seed, std::uint64_t stream = 0);
  Generator(std::uint64_t seed, RandomStream stream, std::uint64_t sub = 0)
      : Generator(seed, (static_cast<std::uint64_t>(stream) << 48) ^ sub) {}

  // Inline: dropout draws one per two elements.
  std::uint64_t next() {
    const std::uint64_t result = std::rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = std::rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, n), unbiased (Lemire's method). REQUIRES: n > 0.
  std::uint64_t below(std::uint64_t n);
  // Uniform in [0, 1) with 24 random bits.
  float uniform();
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal (Box-Muller).
  float normal();

  struct State {
    std::uint64_t s[4];
  };
  State state() const { return {{s_[0], s_[1], s_[2], s_[3]}}; }
  void setState(const State& st);

 private:
  std::uint64_t s_[4];
};

// A uniformly random permutation of 0..n-1 (Fisher-Yates over `g`).
std::vector<std::int64_t> randomPermutation(std::int64_t n, Generator& g);

}  // namespace hpu::core
