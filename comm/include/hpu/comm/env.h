// The environment variables comm/ reads, passed explicitly as a map so that
// every decision is testable without touching the process environment.
// Thread-safety: EnvMap is a plain value; processEnvironment() reads
// `environ` and must not race with setenv() in another thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace hpu::comm {

using EnvMap = std::map<std::string, std::string, std::less<>>;

// A snapshot of the current process environment.
EnvMap processEnvironment();

// The value of `name`, or nullopt when it is unset. An empty value counts as set.
std::optional<std::string> lookup(const EnvMap& env, std::string_view name);

}  // namespace hpu::comm
