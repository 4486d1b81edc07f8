#include "hpu/core/config/params.h"

#include <stdexcept>

#include "hpu/core/config/scalars.h"
#include "hpu/core/base/errors.h"

namespace hpu::core::config {
namespace {
[[noreturn]] void bug(const std::string& what) { throw std::logic_error(what); }
}  // namespace

bool asBool(const Node& n) {
  auto v = n.isScalar() ? parseBool(n.str()) : std::nullopt;
  if (!v) bug("not a bool: '" + n.str() + "'");
  return *v;
}

std::int64_t asInt(const Node& n) {
  auto v = n.isScalar() ? parseInt(n.str()) : std::nullopt;
  if (!v) bug("not an int: '" + n.str() + "'");
  return *v;
}

double asFloat(const Node& n) {
  auto v = n.isScalar() ? parseFloat(n.str()) : std::nullopt;
  if (!v) bug("not a float: '" + n.str() + "'");
  return *v;
}

Params::Params(const StructSchema& schema, const Node& values, std::string path)
    : schema_(&schema), values_(&values), path_(std::move(path)) {}

const Node& Params::node(std::string_view name) const {
  if (schema_->find(name) == nullptr)
    bug(path_ + ": parameter '" + std::string(name) + "' is not declared");
  const Node* n = values_->find(name);
  if (n == nullptr) bug(path_ + ": parameter '" + std::string(name) + "' missing after validation");
  return *n;
}

bool Params::has(std::string_view name) const { return !node(name).isNull(); }
bool Params::getBool(std::string_view name) const { return asBool(node(name)); }
std::int64_t Params::getInt(std::string_view name) const { return asInt(node(name)); }
double Params::getFloat(std::string_view name) const { return asFloat(node(name)); }
std::string Params::getString(std::string_view name) const { return node(name).str(); }

std::vector<std::int64_t> Params::getIntList(std::string_view name) const {
  std::vector<std::int64_t> out;
  for (const Node& n : node(name).items()) out.push_back(asInt(n));
  return out;
}

std::vector<double> Params::getFloatList(std::string_view name) const {
  std::vector<double> out;
  for (const Node& n : node(name).items()) out.push_back(asFloat(n));
  return out;
}

std::vector<std::string> Params::getStringList(std::string_view name) const {
  std::vector<std::string> out;
  for (const Node& n : node(name).items()) out.push_back(n.str());
  return out;
}

void Params::fail(std::string_view name, const std::string& message) const {
  std::string where = node(name).loc().str();
  throw ConfigError((where.empty() ? "" : where + ": ") + pathOf(name) + ": " + message);
}

std::string Params::pathOf(std::string_view name) const { return joinPath(path_, name); }

}  // namespace hpu::core::config
