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

class SchemaRegistry {
 public:
  static SchemaRegistry& instance();

  // Stores the schema (stable address) and indexes its name and aliases.
  const ComponentSchema& add(ComponentSchema schema);
  // Canonical name or alias class path of one of `kinds`; nullptr if none.
  const ComponentSchema* resolve(std::span<const ComponentKind> kinds,
                                 std::string_view name) const;
  std::vector<const ComponentSchema*> list(ComponentKind kind) const;
  // Every name and alias of `kinds`, for suggestions.
  std::vector<std::string> names(std::span<const ComponentKind> kinds) const;

 private:
  std::deque<ComponentSchema> schemas_;
};

// Builds instances of one component base class from normalized config nodes
// ({class_path: Canonical, init_args: {...}}).
template <class Base>
class ComponentFactory {
 public:
  using Create = std::function<std::unique_ptr<Base>(const Params&)>;

  static ComponentFactory& instance() {
    static ComponentFactory f;
    return f;
  }
  void add(const ComponentSchema* schema, Create create) {
    entries_[schema->name] = {schema, std::move(create)};
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
