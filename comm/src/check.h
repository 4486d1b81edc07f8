// HPU_COMM_CHECK: a broken invariant inside comm/ is a bug, not a user error.
// It prints where and what, then aborts (a distributed job must not limp on
// with a corrupted protocol state).
#pragma once

namespace hpu::comm::detail {
[[noreturn]] void checkFailed(const char* condition, const char* file, int line, const char* message);
}  // namespace hpu::comm::detail

#define HPU_COMM_CHECK(cond, message)                                         \
  do {                                                                        \
    if (!(cond)) ::hpu::comm::detail::checkFailed(#cond, __FILE__, __LINE__, message); \
  } while (0)
