// Hyper-parameters as Lightning's loggers flatten them: nested mappings
// joined with a delimiter ("optimizer/lr"), each value a number, a bool or a
// string, and lists, mappings and nulls as Python's str() writes them
// ("[256, 128]", "None"). Pure functions; thread-safe.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "hpu/core/config/node.h"

namespace hpu::core {

struct Hparam {
  std::string key;
  std::variant<double, bool, std::string> value;
  // Python's str() of the value: "0.001", "True", "relu", "[32]".
  std::string text;
};

// REQUIRES: `hparams` is a mapping (or null: none).
std::vector<Hparam> flattenHparams(const config::Node& hparams, const std::string& delimiter);

}  // namespace hpu::core
