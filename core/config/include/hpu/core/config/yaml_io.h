// YAML text <-> config Node. Loading is strict where yaml-cpp is lenient:
// duplicate keys, non-string keys, several documents, oversized files and
// excessive nesting are errors; every error names file:line:col. Emitting
// writes block-style YAML that loads back to an equal Node.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "hpu/core/config/node.h"

namespace hpu::core::config {

struct LoadLimits {
  std::size_t max_bytes = 4 << 20;  // a config file larger than this is refused
  int max_depth = 64;               // maximum nesting of maps and sequences
};

// Throws ConfigError listing every problem found (all duplicate keys, or the
// first syntax error). An empty document loads as a null Node.
// With `problems`, the problems that leave a whole tree (duplicate keys, of
// which the first value is kept; documents after the first, which are not
// read; non-string keys) are appended there and the tree is returned, so
// that a caller can report them with the tree's own. Unreadable files, syntax
// errors and nesting past the limit always throw.
Node loadYamlFile(const std::string& path, const LoadLimits& limits = {}, std::vector<std::string>* problems = nullptr);
Node loadYamlString(std::string_view text, const std::string& origin, const LoadLimits& limits = {},
                    std::vector<std::string>* problems = nullptr);

struct EmitOptions {
  // Returns a one-line comment for the key at `path` ("trainer.max_epochs"),
  // or "" for none; comments are written on the line above the key.
  std::function<std::string(const std::string& path)> comment;
};
std::string emitYaml(const Node& root, const EmitOptions& options = {});

// True when a plain (unquoted) YAML scalar with this text reads as null.
bool isNullScalar(std::string_view s);

}  // namespace hpu::core::config
