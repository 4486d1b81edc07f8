// Errors a user or the cluster can cause in comm/. Every message names the
// rank, the peer or variable involved, and what to change.
#pragma once

#include <stdexcept>
#include <string>

namespace hpu::comm {

// Base of every comm/ error.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A cluster-environment variable is missing, malformed or inconsistent.
// Raised before any socket is opened; the CLI maps it to exit code 2.
class EnvError : public CommError {
 public:
  using CommError::CommError;
};

}  // namespace hpu::comm
