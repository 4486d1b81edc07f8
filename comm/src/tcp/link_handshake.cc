#include "link_handshake.h"

#include <sodium.h>

#include <cstring>
#include <string_view>

#include "../security/sodium_init.h"

namespace hpu::comm::detail {
namespace {

constexpr std::string_view kMagic = "hpu-tcp1";

void putWord(std::byte* out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::byte>(value >> (8 * i));
}

std::uint32_t getWord(const std::byte* in) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<std::uint32_t>(in[i]) << (8 * i);
  return value;
}

// keyed BLAKE2b-256 of purpose | C | A | nonce_C | nonce_A.
std::array<std::uint8_t, 32> derive(const JobToken::Key& key, std::string_view purpose, const LinkHello& c,
                                    const LinkHello& a) {
  crypto_generichash_state state;
  crypto_generichash_init(&state, key.data(), key.size(), 32);
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(purpose.data()), purpose.size());
  std::byte ranks[8];
  putWord(ranks, c.from);
  putWord(ranks + 4, a.from);
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(ranks), sizeof ranks);
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(c.nonce.data()), c.nonce.size());
  crypto_generichash_update(&state, reinterpret_cast<const unsigned char*>(a.nonce.data()), a.nonce.size());
  std::array<std::uint8_t, 32> out{};
  crypto_generichash_final(&state, out.data(), out.size());
  return out;
}

LinkProof asProof(const std::array<std::uint8_t, 32>& bytes) {
  LinkProof proof{};
  std::memcpy(proof.data(), bytes.data(), proof.size());
  return proof;
}

}  // namespace

LinkHello makeLinkHello(std::uint32_t from, std::uint32_t to) {
  initSodium();
  LinkHello hello{from, to, {}};
  randombytes_buf(hello.nonce.data(), hello.nonce.size());
  return hello;
}

std::array<std::byte, kLinkHelloBytes> encodeLinkHello(const LinkHello& hello) {
  std::array<std::byte, kLinkHelloBytes> out{};
  std::memcpy(out.data(), kMagic.data(), kMagic.size());
  putWord(out.data() + 8, hello.from);
  putWord(out.data() + 12, hello.to);
  std::memcpy(out.data() + 16, hello.nonce.data(), hello.nonce.size());
  return out;
}

std::optional<LinkHello> decodeLinkHello(std::span<const std::byte> bytes) {
  if (bytes.size() != kLinkHelloBytes || std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0)
    return std::nullopt;
  LinkHello hello;
  hello.from = getWord(bytes.data() + 8);
  hello.to = getWord(bytes.data() + 12);
  std::memcpy(hello.nonce.data(), bytes.data() + 16, hello.nonce.size());
  return hello;
}

LinkSecrets deriveLinkSecrets(const JobToken::Key& key, const LinkHello& connector, const LinkHello& acceptor) {
  initSodium();
  LinkSecrets s;
  s.connector_proof = asProof(derive(key, "proof-connector", connector, acceptor));
  s.acceptor_proof = asProof(derive(key, "proof-acceptor", connector, acceptor));
  s.connector_to_acceptor = derive(key, "key-c2a", connector, acceptor);
  s.acceptor_to_connector = derive(key, "key-a2c", connector, acceptor);
  return s;
}

bool sameProof(const LinkProof& a, const LinkProof& b) { return sodium_memcmp(a.data(), b.data(), a.size()) == 0; }

}  // namespace hpu::comm::detail
