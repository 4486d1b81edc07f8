// What every rank must agree on before training: the resolved config as an
// ordered list of (key path, value) strings, passed in by the core. Ranks
// compare 32-byte digests first and, when those differ, walk the lists to
// name the first differing key.
// Thread-safety: plain value; functions are pure.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hpu::comm {

struct ConfigFingerprint {
  // (key path, value), e.g. ("trainer.precision", "bf16-mixed"), in the core's order.
  std::vector<std::pair<std::string, std::string>> entries;

  // BLAKE2b-256 over the length-prefixed entries, in order.
  std::array<std::uint8_t, 32> digest() const;
};

// "trainer.precision: bf16-mixed vs 32-true" for the first position where
// `mine` and `reference` differ (a key missing on one side reads "<unset>"),
// or nullopt when they are equal.
std::optional<std::string> describeFirstDifference(const ConfigFingerprint& mine, const ConfigFingerprint& reference);

}  // namespace hpu::comm
