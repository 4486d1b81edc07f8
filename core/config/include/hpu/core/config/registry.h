// The component registries: one per component kind, filled from static
// initialisers (HPU_REGISTER_COMPONENT) and read-only afterwards, which makes
// reads thread-safe. A registration declares the schema once; the factory
// receives the validated init_args.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hpu/core/config/node.h"
#include "hpu/core/config/params.h"
#include "hpu/core/config/schema.h"

namespace hpu::core::config {

// How a class path names a registered class (the rule): by the class's
// name ("ModelCheckpoint"), or by any dotted path that ends in the name and
// lies under one of the packages Lightning users import from (kPackages):
// "lightning.pytorch.callbacks.ModelCheckpoint",
// "pytorch_lightning.callbacks.model_checkpoint.ModelCheckpoint" and
// "lightning_habana.pytorch.strategies.parallel.HPUParallelStrategy" all
// resolve; so do the names a class stands in for.
struct Resolution {
  const ComponentSchema* schema = nullptr;  // nullptr: no class of the kinds has that name
  bool stand_in = false;                    // named by one of schema->stands_in_for
};

class SchemaRegistry {
 public:
  static SchemaRegistry& instance();

  // Stores the schema (stable address).
  const ComponentSchema& add(ComponentSchema schema);
  Resolution resolve(std::span<const ComponentKind> kinds, std::string_view class_path) const;
  std::vector<const ComponentSchema*> list(ComponentKind kind) const;
  // Up to three class paths of `kinds` close to an unknown `class_path`,
  // closest first (its last component compared with the class names).
  std::vector<std::string> closeMatches(std::span<const ComponentKind> kinds, std::string_view class_path) const;

 private:
  std::deque<ComponentSchema> schemas_;
};

// Whether a module path lies under one of the rule's packages.
bool underClassPathPackage(std::string_view module);
// The packages of the rule, for messages: "lightning.pytorch, pytorch_lightning, ...".
std::string classPathPackages();

// For messages: "Callback or Logger".
std::string kindNames(std::span<const ComponentKind> kinds);
// " (registered: EarlyStopping, ModelCheckpoint, ...)", or "" if none is.
std::string registeredClasses(std::span<const ComponentKind> kinds);
// "unknown Callback class 'X'" with the close matches (else the registered
// classes), and where class paths resolve when X lies outside the packages.
std::string unknownClass(std::span<const ComponentKind> kinds, const std::string& class_path);

// Builds instances of one component base class from normalized config nodes
// ({class_path: ComponentSchema::classPath(), init_args: {...}}).
template <class Base>
class ComponentFactory {
 public:
  using Create = std::function<std::unique_ptr<Base>(const Params&)>;

  static ComponentFactory& instance() {
    static ComponentFactory f;
    return f;
  }
  void add(const ComponentSchema* schema, Create create) {
    entries_[schema->classPath()] = {schema, std::move(create)};
  }
  // REQUIRES: `component` was normalized against a type that includes Base's kind.
  std::unique_ptr<Base> create(const Node& component, const std::string& path) const {
    const Node* cls = component.find("class_path");
    const Node* args = component.find("init_args");
    auto it = entries_.find(cls->str());
    if (it == entries_.end()) throwNotRegistered(path, cls->str());
    Params params(it->second.schema->init_args, *args, joinPath(path, "init_args"));
    return it->second.create(params);
  }

 private:
  struct Entry {
    const ComponentSchema* schema;
    Create create;
  };
  [[noreturn]] static void throwNotRegistered(const std::string& path, const std::string& name);
  std::map<std::string, Entry, std::less<>> entries_;
};

template <class Base>
void ComponentFactory<Base>::throwNotRegistered(const std::string& path, const std::string& name) {
  throw std::logic_error(path + ": class '" + name + "' has a schema but no factory");
}

// Registers `schema` and its factory at static-initialisation time.
template <class Base>
struct ComponentRegistration {
  ComponentRegistration(ComponentSchema schema, typename ComponentFactory<Base>::Create create) {
    const ComponentSchema& stored = SchemaRegistry::instance().add(std::move(schema));
    ComponentFactory<Base>::instance().add(&stored, std::move(create));
  }
};

}  // namespace hpu::core::config

#define HPU_CONFIG_CONCAT_INNER(a, b) a##b
#define HPU_CONFIG_CONCAT(a, b) HPU_CONFIG_CONCAT_INNER(a, b)
// HPU_REGISTER_COMPONENT(Base, schema_expr, factory_expr) at namespace scope.
#define HPU_REGISTER_COMPONENT(Base, ...)                                           \
  static const ::hpu::core::config::ComponentRegistration<Base> HPU_CONFIG_CONCAT( \
      hpu_component_registration_, __LINE__)(__VA_ARGS__)
