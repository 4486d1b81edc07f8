#include <cstdio>
#include <string>

#include "hpu/cli/version.h"

int main() {
  std::printf("hpu-train %s\n", std::string(hpu::cli::version()).c_str());
  return 0;
}
