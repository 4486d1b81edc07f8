#include "check.h"

#include <cstdio>
#include <cstdlib>

namespace hpu::comm::detail {

void checkFailed(const char* condition, const char* file, int line, const char* message) {
  std::fprintf(stderr, "hpu-comm internal error at %s:%d: check '%s' failed: %s\n", file, line, condition, message);
  std::fflush(stderr);
  std::abort();
}

}  // namespace hpu::comm::detail
