// Invariant checks for bugs (not for errors a user can cause: those throw
// from errors.h).
//
//   HPU_CHECK(offset <= size_, "offset {} past the end ({})", offset, size_);
//
// A failed check prints "file:line: check failed: <expr>: <message>" to
// stderr and aborts, in every build type: a broken invariant must never run
// on into corrupted memory. The message arguments are evaluated only on
// failure. Thread-safe.
#pragma once

#include <fmt/core.h>

#include <string>

namespace hpu::device::detail {

[[noreturn]] void checkFailed(const char* expr, const char* file, int line,
                              const std::string& message = {});

}  // namespace hpu::device::detail

#define HPU_CHECK(cond, ...)                                                   \
  do {                                                                         \
    if (!(cond)) [[unlikely]]                                                  \
      ::hpu::device::detail::checkFailed(#cond, __FILE__, __LINE__             \
                                         __VA_OPT__(, ::fmt::format(__VA_ARGS__))); \
  } while (0)
