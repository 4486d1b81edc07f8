#include "hpu/cli/version.h"
namespace hpu::cli {
std::string_view version() { return HPU_VERSION; }
}  // namespace hpu::cli
