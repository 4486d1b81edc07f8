// The keys a job derives from its token (see job_token.h):
//   helloMac        HMAC key of Hello / Welcome messages
//   curveServer     Curve25519 key pair every CURVE server socket uses
//   curveClient     Curve25519 key pair every CURVE client socket uses
//   dataPassword    ZMQ PLAIN password of data-plane connections on loopback
//   dataLink        key of the TCP links between nodes (tcp/link_handshake.h)
// Every token holder derives the same keys; nobody else can. A ZAP handler
// admits a CURVE client only if it proves the curveClient secret key, and a
// PLAIN client only with dataPassword.
// Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "hpu/comm/job_token.h"

namespace hpu::comm::detail {

struct CurveKeyPair {
  std::array<std::uint8_t, 32> publicKey{};
  std::array<std::uint8_t, 32> secretKey{};
};

struct JobKeys {
  explicit JobKeys(const JobToken& token);

  JobToken::Key helloMac{};
  CurveKeyPair curveServer;
  CurveKeyPair curveClient;
  std::string dataPassword;  // 64 hex digits
  JobToken::Key dataLink{};
};

}  // namespace hpu::comm::detail
