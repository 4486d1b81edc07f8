#include "hpu/comm/config_fingerprint.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>

#include <spdlog/fmt/fmt.h>

#include "security/sodium_init.h"

namespace hpu::comm {
namespace {

void hashString(crypto_generichash_state& state, const std::string& s) {
  const std::uint64_t size = s.size();
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(&size), sizeof size);
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

const std::string* valueOf(const ConfigFingerprint& fp, const std::string& key) {
  auto it = std::find_if(fp.entries.begin(), fp.entries.end(), [&](const auto& e) { return e.first == key; });
  return it == fp.entries.end() ? nullptr : &it->second;
}

std::string shown(const std::string* value) { return value ? *value : std::string("<unset>"); }

}  // namespace

std::array<std::uint8_t, 32> ConfigFingerprint::digest() const {
  detail::initSodium();
  crypto_generichash_state state;
  std::array<std::uint8_t, 32> out{};
  crypto_generichash_init(&state, nullptr, 0, out.size());
  for (const auto& [key, value] : entries) {
    hashString(state, key);
    hashString(state, value);
  }
  crypto_generichash_final(&state, out.data(), out.size());
  return out;
}

std::optional<std::string> describeFirstDifference(const ConfigFingerprint& mine, const ConfigFingerprint& reference) {
  const std::size_t common = std::min(mine.entries.size(), reference.entries.size());
  for (std::size_t i = 0; i < common; ++i) {
    const auto& [myKey, myValue] = mine.entries[i];
    const auto& [refKey, refValue] = reference.entries[i];
    if (myKey == refKey && myValue == refValue) continue;
    if (myKey == refKey) return fmt::format("{}: {} vs {}", myKey, myValue, refValue);
    // The key lists diverge here: report the first of the two keys whose
    // values differ between the sides (either may be unset).
    const std::string* refForMine = valueOf(reference, myKey);
    if (refForMine == nullptr || *refForMine != myValue) {
      return fmt::format("{}: {} vs {}", myKey, myValue, shown(refForMine));
    }
    const std::string* mineForRef = valueOf(mine, refKey);
    if (mineForRef == nullptr || *mineForRef != refValue) {
      return fmt::format("{}: {} vs {}", refKey, shown(mineForRef), refValue);
    }
    return fmt::format("{}: same value, listed in a different order", myKey);
  }
  if (mine.entries.size() > common) {
    const auto& [key, value] = mine.entries[common];
    return fmt::format("{}: {} vs <unset>", key, value);
  }
  if (reference.entries.size() > common) {
    const auto& [key, value] = reference.entries[common];
    return fmt::format("{}: <unset> vs {}", key, value);
  }
  return std::nullopt;
}

}  // namespace hpu::comm
