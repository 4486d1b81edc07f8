// Composing a config from its sources, in LightningCLI's precedence:
//   defaults < config files (in order) < environment defaults < command line
// Merging and overrides know the schema: a component keeps its init_args when
// a later source names the same class and drops them when it names another;
// "model.lr" reaches model.init_args.lr; "trainer.callbacks+=X" appends and
// "trainer.callbacks.patience" then sets a key of the last callback.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hpu/core/config/node.h"
#include "hpu/core/config/schema.h"
#include "hpu/env/environment.h"

namespace hpu::core::config {

// One dotted assignment: "trainer.max_epochs" = 5, or with `append` a list
// append (+=). `value` carries its source location for messages.
struct Override {
  std::string path;
  Node value;
  bool append = false;
  // The value as typed, when it came as text. As jsonargparse does, a key
  // that takes a string gets this text when YAML reads it as a shape the key
  // does not take ("{epoch}" is a mapping) or cannot read it at all
  // ("{epoch}-{val_loss:.2f}"); then `yaml_problems` says why, for keys that
  // take no string.
  std::string text;
  std::vector<std::string> yaml_problems;
};

// `path` set to `text` as typed: its YAML value, or, when YAML cannot read
// it, a null value and the problems, the key's type then deciding
// (Override::text). `origin` names the text in YAML's messages.
Override textOverride(std::string path, const std::string& text, const std::string& origin);

// Deep-merges `overlay` into `base` (both raw, unvalidated trees of `type`).
void mergeInto(Node& base, const Node& overlay, const Type& type);

// Applies `o` to `root`; problems that can only be seen here (appending to a
// non-list, a key for a list that has no item yet) are appended to `problems`.
void applyOverride(Node& root, const Type& type, const Override& o,
                   std::vector<std::string>& problems);

// Environment defaults: when `env` has JSONARGPARSE_DEFAULT_ENV or
// HPU_DEFAULT_ENV set to true, every PL_<SUBCOMMAND>__<KEY>__<KEY>=value
// becomes an override of <key>.<key> (keys lower-cased). Unknown keys are
// left for validation, which names the variable. A switch set to anything
// but a bool word (true/false/yes/no/on/off) is a problem, not silently off.
std::vector<Override> envOverrides(const Environment& env,
                                   const std::string& subcommand,
                                   std::vector<std::string>& problems);

// A config held in memory (the one a checkpoint saved), merged as a file
// would be; `origin` names it in messages. Relative paths in it are read from
// the working directory, as the command line's.
struct ConfigDocument {
  std::string origin;
  std::string text;
};

struct ConfigSources {
  std::vector<ConfigDocument> documents;  // merged first
  std::vector<std::string> files;   // --config, in command-line order
  std::vector<Override> overrides;  // dotted flags, in command-line order
  Environment env;
  std::string subcommand;
  bool template_only = false;  // required keys may be missing (see normalize())
};

// Loads, merges, overrides and validates; throws ConfigError listing every
// problem. The result is canonical (see normalize.h); what was rewritten on
// the way is appended to `notes` (see normalize()).
Node composeConfig(const ConfigSources& sources, const Type& root, std::vector<std::string>* notes = nullptr);

}  // namespace hpu::core::config
