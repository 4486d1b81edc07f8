// The config keys section of `hpu-train fit --help`, generated from the
// registered schemas: every trainer key and every init_arg of every
// registered component, each with type, default and doc.
#pragma once

#include <string>

namespace hpu::cli {

std::string configKeysHelp();

}  // namespace hpu::cli
