#include "hpu/device/check.h"

#include <cstdio>
#include <cstdlib>

namespace hpu::device::detail {

void checkFailed(const char* expr, const char* file, int line, const std::string& message) {
  if (message.empty())
    std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, expr);
  else
    std::fprintf(stderr, "%s:%d: check failed: %s: %s\n", file, line, expr, message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace hpu::device::detail
