#include "hpu/env/environment.h"

#include <cstring>
#include <stdexcept>

#include "hpu/env/catalogue.h"

namespace hpu {

Environment Environment::fromEntries(const char* const* entries) {
  Environment env;
  for (const char* const* entry = entries; entry != nullptr && *entry != nullptr; ++entry) {
    const char* eq = std::strchr(*entry, '=');
    if (eq == nullptr) continue;
    env.variables_.emplace(std::string(*entry, static_cast<std::size_t>(eq - *entry)), std::string(eq + 1));
  }
  return env;
}

std::optional<std::string> Environment::get(std::string_view name) const {
  if (env::findVariable(name) == nullptr)
    throw std::logic_error("environment variable " + std::string(name) +
                           " is read but not in the catalogue (env/src/catalogue.cc): add it with its meaning");
  const auto it = variables_.find(name);
  if (it == variables_.end()) return std::nullopt;
  return it->second;
}

void Environment::unset(std::string_view name) {
  const auto it = variables_.find(name);
  if (it != variables_.end()) variables_.erase(it);
}

std::vector<std::string> Environment::entries() const {
  std::vector<std::string> out;
  out.reserve(variables_.size());
  for (const auto& [name, value] : variables_) out.push_back(name + "=" + value);
  return out;
}

}  // namespace hpu
