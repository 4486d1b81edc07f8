#pragma once
#include <string_view>
namespace hpu::cli {
// The program version (CMake's PROJECT_VERSION).
std::string_view version();
}  // namespace hpu::cli
