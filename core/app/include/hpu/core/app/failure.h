// How a failure is reported: the exit code an error maps to (2 for a usage
// or config error, 1 otherwise), and, in the process that started a node's
// local ranks, the job's failure composed from its own error and what its
// workers reported: the root cause once, first, with the ranks that share
// it; errors that only follow from it (a peer lost, the group aborted) at
// debug level. Thread-safety: none needed (called once, at the end).
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "hpu/comm/launcher.h"
#include "hpu/core/base/errors.h"

namespace hpu::core {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;  // a bad command line, config or environment variable

struct Failure {
  int exit_code = kExitFailure;
  std::vector<std::string> lines;  // the message, one problem a line
  // A consequence of another rank's failure (comm::PeerLostError).
  bool secondary = false;
  // A comm::CommError other than a bad variable: a consequence too when a
  // local worker failed first (the launcher aborted this rank's group).
  bool comm_error = false;
  bool reported = false;  // JobFailedError: printed already
};

// The failure `error` is. REQUIRES: error is not null.
Failure failureOf(std::exception_ptr error);

// A job's failure that reportJobFailure already printed; exits with its code.
class JobFailedError : public Error {
 public:
  explicit JobFailedError(int exit_code) : Error("the job failed"), exit_code_(exit_code) {}
  int exitCode() const { return exit_code_; }

 private:
  int exit_code_;
};

// Prints the job's failure as this process (global rank `rank`, its own
// failure `own`, none if it succeeded) and the local ranks it started
// (`workers`, as they ended) saw it, and returns the exit code of the root
// cause.
int reportJobFailure(const std::optional<Failure>& own, int rank, const std::vector<comm::WorkerExit>& workers);

}  // namespace hpu::core
