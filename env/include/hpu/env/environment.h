// Environment variables as an explicit value. An executable takes one
// snapshot of its environment in main() (fromEntries(envp)) and hands it
// down; no library reads the process environment itself, so every setting
// is testable with an environment a test describes, and the catalogue
// (catalogue.h) is the complete list of what the product reads: get() and
// contains() refuse a name it does not list.
// Thread-safety: a plain value; const access is safe from any thread.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hpu {

class Environment {
 public:
  using Variables = std::map<std::string, std::string, std::less<>>;

  Environment() = default;
  Environment(std::initializer_list<Variables::value_type> variables) : variables_(variables) {}
  explicit Environment(Variables variables) : variables_(std::move(variables)) {}

  // The variables of "NAME=value" strings ending in a null pointer, as
  // main()'s third argument holds them; an entry without '=' is skipped.
  static Environment fromEntries(const char* const* entries);

  // The value of `name`, or nullopt when it is unset (an empty value counts
  // as set). REQUIRES: the catalogue lists `name` (throws std::logic_error
  // naming it otherwise: a variable read must be documented).
  std::optional<std::string> get(std::string_view name) const;
  bool contains(std::string_view name) const { return get(name).has_value(); }

  void set(std::string name, std::string value) { variables_[std::move(name)] = std::move(value); }
  void unset(std::string_view name);

  // Every variable, listed or not: what a child process inherits, and what
  // the catalogue's name families (PL_<SUBCOMMAND>__<KEY>) are matched in.
  const Variables& variables() const { return variables_; }
  // "NAME=value" for each variable, for execve().
  std::vector<std::string> entries() const;

  bool operator==(const Environment&) const = default;

 private:
  Variables variables_;
};

}  // namespace hpu
