// YAML text <-> config Node. Loading is strict where yaml-cpp is lenient:
// duplicate keys, non-string keys, several documents, oversized files and
// excessive nesting are errors; every error names file:line:col. Emitting
// writes block-style YAML that loads back to an equal Node.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "hpu/core/config/node.h"

namespace hpu::core::config {

struct LoadLimits {
  std::size_t max_bytes = 4 << 20;  // a config file larger than this is refused
  int max_depth = 64;               // maximum nesting of maps and sequences
};

// Throws ConfigError listing every problem found (all duplicate keys, or the
// first syntax error). An empty document loads as a null Node.
Node loadYamlFile(const std::string& path, const LoadLimits& limits = {});
Node loadYamlString(std::string_view text, const std::string& origin,
                    const LoadLimits& limits = {});

struct EmitOptions {
  // Returns a one-line comment for the key at `path` ("trainer.max_epochs"),
  // or "" for none; comments are written on the line above the key.
  std::function<std::string(const std::string& path)> comment;
};
std::string emitYaml(const Node& root, const EmitOptions& options = {});

// True when a plain (unquoted) YAML scalar with this text reads as null.
bool isNullScalar(std::string_view s);

}  // namespace hpu::core::config
