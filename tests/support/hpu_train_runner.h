// Runs the real hpu-train binary as a user would: argv, an explicit
// environment (nothing inherited), a fresh scratch working directory, stdout
// and stderr captured, and a hard deadline after which the child's whole
// process group is killed. The fixture HpuTrainTest gives every test its own
// scratch directory and removes it afterwards.
// Not thread-safe: one test runs the binary at a time.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace hpu::cli::testing {

struct RunResult {
  int exit_code = -1;      // the child's exit status; -1 if it did not exit normally
  int signal = 0;          // the signal that ended it, 0 if it exited
  bool timed_out = false;  // killed at the deadline
  std::string out;         // everything written to stdout
  std::string err;         // everything written to stderr
  std::chrono::duration<double> wall{};

  // "exit 2; stderr: ..." for assertion messages.
  std::string describe() const;
};

struct RunOptions {
  std::filesystem::path cwd;               // REQUIRES: an existing directory
  std::map<std::string, std::string> env;  // the child's entire environment
  std::chrono::milliseconds timeout{60000};
};

// Starts `binary` with `args` (argv[0] is the binary's path), waits for it up
// to the deadline and returns what it did. Throws std::runtime_error if the
// child cannot be started.
RunResult runProgram(const std::filesystem::path& binary, const std::vector<std::string>& args,
                     const RunOptions& options);

// A directory under $TMPDIR (or /tmp) that is removed with its contents.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string readFile(const std::filesystem::path& path);
void writeFile(const std::filesystem::path& path, const std::string& text);

// A file or folder of this checkout, by its path from the top ("core/loggers/proto").
std::filesystem::path sourcePath(const std::string& relative);

// True once the process `pid` has ended (gone, or a zombie waiting for its
// reaper), polling until `deadline`; false if it still runs then.
bool processEnded(const std::string& pid, std::chrono::steady_clock::time_point deadline);

// The canonical base config of most tests: BoringModel on RandomDataModule,
// seed 42, one device (tests/support/boring.yaml).
std::string boringConfig();

// Every test gets a fresh working directory and an environment holding only
// what it sets (HPU_LOG_LEVEL=warn keeps progress logs out of the output).
class HpuTrainTest : public ::testing::Test {
 protected:
  // Runs hpu-train in the scratch directory with env().
  RunResult run(const std::vector<std::string>& args);
  // Runs scripts/<name> of this checkout with /bin/bash in the scratch
  // directory, with env() plus PATH=/usr/bin:/bin.
  RunResult runScript(const std::string& name, const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(60000));
  // The hpu-train binary under test.
  static std::string trainBinary();
  // Runs `fit <args> --print_config[=flags]`, expects exit 0 and returns stdout.
  std::string printConfig(const std::vector<std::string>& args, const std::string& flags = "");
  // Writes `text` to `name` in the scratch directory; returns `name`.
  std::string write(const std::string& name, const std::string& text);
  std::string read(const std::string& name) const;

  std::map<std::string, std::string>& env() { return env_; }
  const std::filesystem::path& dir() const { return scratch_.path(); }

 private:
  ScratchDir scratch_;
  std::map<std::string, std::string> env_{{"HPU_LOG_LEVEL", "warn"}};
};

}  // namespace hpu::cli::testing
