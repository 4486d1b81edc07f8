// The real clients that judge hpu-train's files run from the virtual
// environment scripts/install-deps.sh --interop makes. A test that needs it
// fails when it is missing under CI=true (CI must build it) and is skipped
// otherwise.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace hpu::interop {

inline std::filesystem::path python() {
  return std::filesystem::path(HPU_SOURCE_DIR) / ".venv/interop/bin/python";
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
