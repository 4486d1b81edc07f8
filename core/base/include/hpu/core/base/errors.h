// Errors a user can cause in core/. The CLI prints what() on one line and
// exits 2 for UsageError/ConfigError (bad input, nothing ran) and 1 for every
// other Error (a runtime failure).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace hpu::core {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad command line or config: exit code 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

// One or more config problems, each already formatted as
// "file:line:col: key.path: message". what() joins them with newlines.
class ConfigError : public UsageError {
 public:
  explicit ConfigError(std::vector<std::string> problems);
  explicit ConfigError(std::string problem) : ConfigError(std::vector<std::string>{std::move(problem)}) {}
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

// A data file is missing or malformed: exit code 1.
class DataError : public Error {
 public:
  using Error::Error;
};

// A checkpoint cannot be written, read or trusted: exit code 1.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

}  // namespace hpu::core
