// The job token: a shared secret that makes a process a member of the job.
//
// Sources, in order: HPU_JOB_TOKEN (the secret itself) or HPU_JOB_TOKEN_FILE
// (a file readable by its owner only, mode 0600, holding the secret; a
// trailing newline is ignored). Setting both is an error; a secret must have
// at least 16 characters. The token never appears on a command line, in a
// log line or in an error message.
//
// Without a token:
//  - the local launcher (one node, trainer.devices > 1) generates a random
//    per-launch token and hands it to its workers through HPU_JOB_TOKEN;
//  - a rendezvous on a loopback MASTER_ADDR runs with an empty token (any
//    local process that knows the port could join; rank 0 warns);
//  - a rendezvous on any other address is refused with an EnvError.
//
// Every key the job uses is derived from the secret with keyed BLAKE2b (see
// derive()): the hello MAC, the CURVE key pairs, the data-plane password.
// Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "hpu/env/environment.h"

namespace hpu::comm {

class JobToken {
 public:
  using Key = std::array<std::uint8_t, 32>;

  // An empty token (see above for when that is allowed).
  JobToken() = default;

  // Reads HPU_JOB_TOKEN / HPU_JOB_TOKEN_FILE from `env`. Throws EnvError for
  // both set, an unreadable / group- or world-accessible file, or a secret
  // shorter than 16 characters.
  static JobToken fromEnv(const Environment& env);

  // 32 random bytes, hex-encoded.
  static JobToken generate();

  bool empty() const { return secret_.empty(); }

  // The value to put in a child process's HPU_JOB_TOKEN (never log it).
  const std::string& secretForChildEnvironment() const { return secret_; }

  // A 32-byte key for one purpose: BLAKE2b-256(purpose, key = BLAKE2b-256(secret)).
  Key derive(std::string_view purpose) const;

 private:
  explicit JobToken(std::string secret) : secret_(std::move(secret)) {}
  std::string secret_;
};

}  // namespace hpu::comm
