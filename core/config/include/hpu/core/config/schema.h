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
#include "hpu/core/config/paths.h"

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

// A string value as another accelerator's configs spell it ("ddp", "gpu"):
// rewritten to `to` with a note, or, when `to` is empty, refused because of
// `reason` (one message for every spelling it lists).
struct ForeignSpelling {
  std::vector<std::string> from;
  std::string to;
  std::string reason;
};

// A parameter type: a value of the small grammar
//   bool | int | float | str | dict | list[T] | component of kinds | struct | T | U | null
class Type {
 public:
  enum class Tag { kBool, kInt, kFloat, kString, kDict, kList, kComponent, kStruct, kUnion, kNull };

  static Type boolean();
  static Type integer();
  static Type real();
  // A string, optionally restricted to `choices` (which --help lists), and
  // spellings of other accelerators that it maps or refuses.
  static Type string(std::vector<std::string> choices = {}, std::vector<ForeignSpelling> foreign = {});
  // A string naming a file or directory to read, resolved when a config is
  // composed (paths.h); `is_literal` picks the values that are not paths.
  static Type path(PathKind kind, bool (*is_literal)(std::string_view) = nullptr);
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
  // The foreign spelling `value` is, or nullptr.
  const ForeignSpelling* foreignSpelling(std::string_view value) const;
  const std::vector<ComponentKind>& kinds() const { return kinds_; }
  // A path-typed string's spec, or nullptr.
  const PathSpec* pathSpec() const { return path_ ? &*path_ : nullptr; }
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
  std::vector<ForeignSpelling> foreign_;
  std::optional<PathSpec> path_;
  std::vector<ComponentKind> kinds_;
  const StructSchema* schema_ = nullptr;
  std::optional<Bound> lower_, upper_;
};

struct ParamSpec {
  std::string name;
  Type type;
  std::string default_yaml;  // the default, written as YAML ("0.001", "[256, 128]", "null")
  std::string doc;           // one line
  // Non-empty: the key is accepted, as LightningCLI writes it, with its
  // default value only; another value is refused with this reason ("hpu-train's
  // optimizers minimize the loss; negate it instead").
  std::string only_default_because = "";
  // A key of hpu-train's own, which LightningCLI does not know: printed only
  // when set to something other than its default, so that a printed config
  // also runs under LightningCLI.
  bool own = false;

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

// A registered class. Its class path is where LightningCLI finds the same
// class: `module` + "." + `name`, with `module` the shortest import path
// jsonargparse prints ("lightning.pytorch.callbacks", "torch.optim",
// "lightning_habana"); a class of hpu-train alone has no module and is
// printed by its name. Besides its name and class path, a class resolves
// from the paths of registry.h's rule.
struct ComponentSchema {
  ComponentKind kind;
  std::string name;
  std::string module;
  StructSchema init_args;
  std::string doc;
  // Names of what this class runs in place of, resolved by the same rule
  // and reported in a note: another accelerator's class (DDPStrategy), a
  // function that does its job (torch.utils.checkpoint.checkpoint), an
  // architecture it implements (MistralForCausalLM).
  std::vector<std::string> stands_in_for = {};
  // The name a string setting gives this class by (trainer.profiler:
  // pytorch), resolved as the class itself: a key set under that name
  // (--trainer.profiler.row_limit=5) applies to the class with its defaults.
  std::string short_name = "";

  // "lightning.pytorch.callbacks.ModelCheckpoint", or the name alone.
  std::string classPath() const { return module.empty() ? name : module + "." + name; }
};

}  // namespace hpu::core::config
