// --print_config: a canonical config as YAML, optionally without defaults or
// nulls, optionally with each key's doc as a comment. The output loads back
// (with --config) to the same canonical config.
#pragma once

#include <string>

#include "hpu/core/config/node.h"
#include "hpu/core/config/schema.h"

namespace hpu::core::config {

struct PrintOptions {
  bool skip_default = false;  // omit keys whose value is their default
  bool skip_null = false;     // omit keys whose value is null
  bool comments = false;      // "# doc (type: T)" above each key
};

// REQUIRES: `config` is canonical for `type` (see normalize.h).
std::string printConfig(const Node& config, const Type& type, const PrintOptions& options);

}  // namespace hpu::core::config
