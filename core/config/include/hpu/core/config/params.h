// Typed, read-only access to a component's validated init_args. The values
// were checked against the component's schema before the component is built,
// so the getters cannot fail on user input; asking for an undeclared
// parameter or the wrong type is a bug (HPU_CHECK).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hpu/core/config/node.h"
#include "hpu/core/config/schema.h"

namespace hpu::core::config {

class Params {
 public:
  // `path` is where init_args live in the config ("model.init_args"), for
  // messages the component raises about its own values.
  Params(const StructSchema& schema, const Node& values, std::string path);

  bool has(std::string_view name) const;  // declared and not null
  bool getBool(std::string_view name) const;
  std::int64_t getInt(std::string_view name) const;
  double getFloat(std::string_view name) const;
  std::string getString(std::string_view name) const;
  std::vector<std::int64_t> getIntList(std::string_view name) const;
  std::vector<double> getFloatList(std::string_view name) const;
  std::vector<std::string> getStringList(std::string_view name) const;
  // The raw node of a parameter (unions, dicts, nested components).
  const Node& node(std::string_view name) const;
  // Throws ConfigError "file:line:col: model.init_args.NAME: message" for a
  // constraint the schema cannot express (checked by the component).
  [[noreturn]] void fail(std::string_view name, const std::string& message) const;
  // "model.init_args.lr", for messages.
  std::string pathOf(std::string_view name) const;
  const std::string& path() const { return path_; }
  const StructSchema& schema() const { return *schema_; }
  const Node& values() const { return *values_; }

 private:
  const StructSchema* schema_;
  const Node* values_;
  std::string path_;
};

// Typed reads of canonical (validated) scalar nodes, shared by Params and
// code that walks union-typed values.
bool asBool(const Node& n);
std::int64_t asInt(const Node& n);
double asFloat(const Node& n);

}  // namespace hpu::core::config
