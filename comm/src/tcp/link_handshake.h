// The handshake that opens a TCP link between two ranks (tcp_links.h): what
// each end sends and how it proves the job's data link key and derives the
// link's keys. The lower rank connects (C), the higher one accepts (A):
//
//   C -> A  hello: "hpu-tcp1", C, A, nonce_C (32 random bytes)    48 bytes
//   A -> C  hello: "hpu-tcp1", A, C, nonce_A; proof_A             80 bytes
//   C -> A  proof_C                                                32 bytes
//
// (ranks as 4-byte little-endian words). With encryption each end then
// starts its stream with its secretstream header (24 bytes). Every value is
// keyed BLAKE2b under the job's data link key over a purpose and the
// transcript (C, A, nonce_C, nonce_A): proofs for "proof-connector" and
// "proof-acceptor", stream keys for "key-c2a" and "key-a2c". A peer without
// the key cannot make a proof, and fresh nonces on both ends keep a
// recorded handshake from being replayed.
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "hpu/comm/job_token.h"

namespace hpu::comm::detail {

using LinkNonce = std::array<std::byte, 32>;
using LinkProof = std::array<std::byte, 32>;
using LinkStreamKey = std::array<std::uint8_t, 32>;

inline constexpr std::size_t kLinkHelloBytes = 48;

struct LinkHello {
  std::uint32_t from = 0;
  std::uint32_t to = 0;
  LinkNonce nonce{};
};

// A hello with a fresh random nonce.
LinkHello makeLinkHello(std::uint32_t from, std::uint32_t to);
std::array<std::byte, kLinkHelloBytes> encodeLinkHello(const LinkHello& hello);
// nullopt when the bytes are not a hello (another program, another version).
std::optional<LinkHello> decodeLinkHello(std::span<const std::byte> bytes);

struct LinkSecrets {
  LinkProof connector_proof{}, acceptor_proof{};
  LinkStreamKey connector_to_acceptor{}, acceptor_to_connector{};
};

// Both ends compute the same from the two hellos (the connector's first).
LinkSecrets deriveLinkSecrets(const JobToken::Key& key, const LinkHello& connector, const LinkHello& acceptor);

// Constant-time comparison.
bool sameProof(const LinkProof& a, const LinkProof& b);

}  // namespace hpu::comm::detail
