// The real clients that judge hpu-train's files run from the virtual
// environment scripts/install-deps.sh --interop makes. A test that needs it
// fails when it is missing under CI=true (CI must build it) and is skipped
// otherwise.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "hpu_train_runner.h"

namespace hpu::interop {

inline std::filesystem::path python() {
  return std::filesystem::path(HPU_SOURCE_DIR) / ".venv/interop/bin/python";
}

// Runs `script` (a path from the top of this checkout) with `args` under the
// judges' interpreter in `cwd`, offline for the Hugging Face hub, with only
// PATH, HOME (`cwd`) and one OpenMP thread in its environment.
inline cli::testing::RunResult runPythonScript(const std::string& script, const std::vector<std::string>& args,
                                               const std::filesystem::path& cwd, std::chrono::seconds timeout) {
  cli::testing::RunOptions o;
  o.cwd = cwd;
  o.env = {{"PATH", "/usr/bin:/bin"}, {"HF_HUB_OFFLINE", "1"}, {"TRANSFORMERS_OFFLINE", "1"},
           {"HOME", cwd.string()}, {"OMP_NUM_THREADS", "1"}};
  o.timeout = timeout;
  std::vector<std::string> all{(std::filesystem::path(HPU_SOURCE_DIR) / script).string()};
  all.insert(all.end(), args.begin(), args.end());
  return cli::testing::runProgram(python(), all, o);
}

inline bool inCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

}  // namespace hpu::interop

// In a test body or SetUp: fails or skips (and returns) without the judges'
// environment. A macro, as GTEST_SKIP returns from the function it is in.
#define HPU_REQUIRE_INTEROP_PYTHON()                                                                     \
  do {                                                                                                   \
    if (!std::filesystem::exists(::hpu::interop::python())) {                                           \
      if (::hpu::interop::inCi())                                                                        \
        GTEST_FAIL() << ::hpu::interop::python() << " is missing: .ci/run must run scripts/install-deps.sh --interop"; \
      GTEST_SKIP() << "no " << ::hpu::interop::python() << " (scripts/install-deps.sh --interop makes it)"; \
    }                                                                                                    \
  } while (0)
