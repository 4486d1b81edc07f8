// Declarations of what a config may contain: parameter types, parameters
// (name, type, default, doc), structs (the trainer group, the top level) and
// components (a registered class with its init_args). One declaration per
// component drives validation, --help and --print_config.
// Schemas are immutable after static initialisation; reading is thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpu/core/config/node.h"

namespace hpu::core::config {

enum class ComponentKind {
  kModel,
  kDataModule,
  kOptimizer,
  kLRScheduler,
  kCallback,
  kLogger,
  kProfiler,
  kAccelerator,
  kStrategy,
  kPrecisionPlugin,
  kCheckpointIO,
  kClusterEnvironment,
  kLayer,  // a layer of the YAML-defined Sequential model
};
// "Model", "DataModule", ..., "PrecisionPlugin".
std::string_view kindName(ComponentKind kind);

struct StructSchema;

// A parameter type: a value of the small grammar
//   bool | int | float | str | dict | list[T] | component of kinds | struct | T | U | null
class Type {
 public:
  enum class Tag { kBool, kInt, kFloat, kString, kDict, kList, kComponent, kStruct, kUnion, kNull };

  static Type boolean();
  static Type integer();
  static Type real();
  // A string, optionally restricted to `choices`.
  static Type string(std::vector<std::string> choices = {});
  // A free-form mapping (kept verbatim, e.g. a DeepSpeed config).
  static Type dict();
  static Type list(Type element);
  static Type component(std::vector<ComponentKind> kinds);
  static Type structure(const StructSchema* schema);
  static Type anyOf(std::vector<Type> alternatives);
  static Type null();
  // T | null
  static Type optional(Type t);

  // Numeric bounds (inclusive unless `exclusive`).
  Type& min(double v, bool exclusive = false);
  Type& max(double v, bool exclusive = false);

  Tag tag() const { return tag_; }
  const std::vector<Type>& args() const { return args_; }  // list element / union alternatives
  const std::vector<std::string>& choices() const { return choices_; }
  const std::vector<ComponentKind>& kinds() const { return kinds_; }
  const StructSchema* schema() const { return schema_; }
  struct Bound {
    double value;
    bool exclusive;
  };
  const std::optional<Bound>& lower() const { return lower_; }
  const std::optional<Bound>& upper() const { return upper_; }
  bool acceptsNull() const;

  // Human-readable: "int", "list[int]", "int | str | list[int]", "Optional[float]".
  std::string name() const;

 private:
  Tag tag_ = Tag::kNull;
  std::vector<Type> args_;
  std::vector<std::string> choices_;
  std::vector<ComponentKind> kinds_;
  const StructSchema* schema_ = nullptr;
  std::optional<Bound> lower_, upper_;
};

struct ParamSpec {
  std::string name;
  Type type;
  std::string default_yaml;  // the default, written as YAML ("0.001", "[256, 128]", "null")
  std::string doc;           // one line
  // Accepted for compatibility with LightningCLI configs, but only with its
  // default value; anything else is refused with a clear message.
  bool only_default = false;

  // Parsed once, lazily (registration parses every component's defaults up
  // front, so later calls only read).
  const Node& defaultValue() const;
  mutable std::optional<Node> parsed_default_cache{};
};

struct StructSchema {
  std::string name;  // "trainer", "" for the top level
  std::string doc;
  std::vector<ParamSpec> params;

  const ParamSpec* find(std::string_view param) const;
  std::vector<std::string> paramNames() const;
};

// A registered class: its canonical name, the class paths that resolve to it
// (LightningCLI spellings), and its init_args.
struct ComponentSchema {
  ComponentKind kind;
  std::string name;
  std::vector<std::string> aliases;
  StructSchema init_args;
  std::string doc;
};

}  // namespace hpu::core::config
