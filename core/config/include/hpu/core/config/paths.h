// File-valued settings and the one rule for where a relative path points.
//
// A key whose value names a file or a directory to read (a model's
// config.json, a pretrained directory, a corpus, a tokenizer, a checkpoint,
// a DeepSpeed config) has a path type (Type::path). Composing a config
// resolves each value the user gave such a key:
//   - an absolute path is itself;
//   - a relative path written in a config file is read from the folder of
//     that file, as jsonargparse's path types read it; when nothing is there,
//     from the working directory, and a note says so (a config naming what
//     the user makes where they run: fortunes-llama/, riddles.jsonl);
//   - a relative path from the command line or the environment is read from
//     the working directory.
// A path found nowhere, or of the wrong kind (a file where a directory is
// expected), is a config error naming the file:line:col, the key and the
// resolved path. The value then becomes the path found, relative to the
// working directory when both were relative, so every rank of a job started
// alike from the same folder reads the same text, and code that opens it
// opens it as it stands. Command-line arguments that name files (export's
// --ckpt_path, consolidate's input) follow the working-directory rule through
// the same function. Thread-safe (reads the file system only).
#pragma once

#include <string>
#include <string_view>

#include "hpu/core/config/node.h"

namespace hpu::core::config {

enum class PathKind { kFile, kDirectory, kFileOrDirectory };

// What a path-typed key takes: a file, a directory or either, and the values
// of that key that are not paths at all (a tokenizer's `byte`, ckpt_path's
// `last`, a chat template's own text), which are left as they are.
struct PathSpec {
  PathKind kind = PathKind::kFile;
  bool (*is_literal)(std::string_view value) = nullptr;

  bool literal(std::string_view value) const { return is_literal != nullptr && is_literal(value); }
};

struct ResolvedPath {
  std::string path;     // what to open (valid when problem is empty)
  std::string note;     // non-empty: the working-directory fallback was taken, said as "loc: key: ..."
  std::string problem;  // non-empty: "loc: key: ... not found: RESOLVED (the rule)"
};

// Resolves the path `value` names for the key `key_path` by the rule above.
// REQUIRES: value is a scalar.
ResolvedPath resolvePath(const Node& value, PathKind kind, std::string_view key_path);

}  // namespace hpu::core::config
