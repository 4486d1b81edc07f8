#include "hpu/core/config/schema.h"

#include <algorithm>
#include <cstdlib>

#include "hpu/core/config/yaml_io.h"
#include "hpu/core/base/errors.h"

namespace hpu::core::config {

std::string_view kindName(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::kModel: return "Model";
    case ComponentKind::kDataModule: return "DataModule";
    case ComponentKind::kOptimizer: return "Optimizer";
    case ComponentKind::kLRScheduler: return "LRScheduler";
    case ComponentKind::kCallback: return "Callback";
    case ComponentKind::kLogger: return "Logger";
    case ComponentKind::kProfiler: return "Profiler";
    case ComponentKind::kAccelerator: return "Accelerator";
    case ComponentKind::kStrategy: return "Strategy";
    case ComponentKind::kPrecisionPlugin: return "PrecisionPlugin";
    case ComponentKind::kCheckpointIO: return "CheckpointIO";
    case ComponentKind::kClusterEnvironment: return "ClusterEnvironment";
    case ComponentKind::kLayer: return "Layer";
  }
  return "?";
}

Type Type::boolean() {
  Type t;
  t.tag_ = Tag::kBool;
  return t;
}
Type Type::integer() {
  Type t;
  t.tag_ = Tag::kInt;
  return t;
}
Type Type::real() {
  Type t;
  t.tag_ = Tag::kFloat;
  return t;
}
Type Type::string(std::vector<std::string> choices, std::vector<ForeignSpelling> foreign) {
  Type t;
  t.tag_ = Tag::kString;
  t.choices_ = std::move(choices);
  t.foreign_ = std::move(foreign);
  return t;
}

Type Type::path(PathKind kind, bool (*is_literal)(std::string_view)) {
  Type t = string();
  t.path_ = PathSpec{kind, is_literal};
  return t;
}

const ForeignSpelling* Type::foreignSpelling(std::string_view value) const {
  for (const ForeignSpelling& f : foreign_)
    if (std::find(f.from.begin(), f.from.end(), value) != f.from.end()) return &f;
  return nullptr;
}
Type Type::dict() {
  Type t;
  t.tag_ = Tag::kDict;
  return t;
}
Type Type::list(Type element) {
  Type t;
  t.tag_ = Tag::kList;
  t.args_.push_back(std::move(element));
  return t;
}
Type Type::component(std::vector<ComponentKind> kinds) {
  Type t;
  t.tag_ = Tag::kComponent;
  t.kinds_ = std::move(kinds);
  return t;
}
Type Type::structure(const StructSchema* schema) {
  Type t;
  t.tag_ = Tag::kStruct;
  t.schema_ = schema;
  return t;
}
Type Type::anyOf(std::vector<Type> alternatives) {
  Type t;
  t.tag_ = Tag::kUnion;
  t.args_ = std::move(alternatives);
  return t;
}
Type Type::null() { return Type{}; }
Type Type::optional(Type t) { return anyOf({std::move(t), null()}); }

Type& Type::min(double v, bool exclusive) {
  lower_ = Bound{v, exclusive};
  return *this;
}
Type& Type::max(double v, bool exclusive) {
  upper_ = Bound{v, exclusive};
  return *this;
}

bool Type::acceptsNull() const {
  if (tag_ == Tag::kNull) return true;
  if (tag_ != Tag::kUnion) return false;
  for (const Type& a : args_)
    if (a.acceptsNull()) return true;
  return false;
}

std::string Type::name() const {
  switch (tag_) {
    case Tag::kBool: return "bool";
    case Tag::kInt: return "int";
    case Tag::kFloat: return "float";
    case Tag::kString: {
      if (choices_.empty()) return "str";
      std::string s;
      for (const auto& c : choices_) s += (s.empty() ? "" : "|") + c;
      return "{" + s + "}";
    }
    case Tag::kDict: return "dict";
    case Tag::kList: return "list[" + args_[0].name() + "]";
    case Tag::kComponent: {
      std::string s;
      for (ComponentKind k : kinds_) s += (s.empty() ? "" : " | ") + std::string(kindName(k));
      return s;
    }
    case Tag::kStruct: return schema_->name.empty() ? "config" : schema_->name;
    case Tag::kNull: return "null";
    case Tag::kUnion: {
      std::vector<const Type*> non_null;
      for (const Type& a : args_)
        if (a.tag_ != Tag::kNull) non_null.push_back(&a);
      std::string s;
      for (const Type* a : non_null) s += (s.empty() ? "" : " | ") + a->name();
      if (non_null.size() != args_.size())
        return non_null.size() == 1 ? "Optional[" + s + "]" : "Optional[" + s + "]";
      return s;
    }
  }
  return "?";
}

const Node& ParamSpec::defaultValue() const {
  if (!parsed_default_cache) parsed_default_cache = loadYamlString(default_yaml, "default of " + name);
  return *parsed_default_cache;
}

const ParamSpec* StructSchema::find(std::string_view param) const {
  for (const ParamSpec& p : params)
    if (p.name == param) return &p;
  return nullptr;
}

std::vector<std::string> StructSchema::paramNames() const {
  std::vector<std::string> names;
  for (const ParamSpec& p : params) names.push_back(p.name);
  return names;
}

}  // namespace hpu::core::config
