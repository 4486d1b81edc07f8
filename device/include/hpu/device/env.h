// Environment variables as an explicit input: the emulator reads its settings
// from an Env, so tests describe an environment without touching the
// process's own. Not thread-safe for concurrent mutation; const access is.
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace hpu::device {

class Env {
 public:
  Env() = default;
  Env(std::initializer_list<std::pair<const std::string, std::string>> vars) : vars_(vars) {}

  // A snapshot of the process environment.
  static Env fromProcess();

  std::optional<std::string> get(std::string_view name) const;
  void set(std::string name, std::string value) { vars_[std::move(name)] = std::move(value); }
  void unset(std::string_view name);

 private:
  std::map<std::string, std::string, std::less<>> vars_;
};

}  // namespace hpu::device
