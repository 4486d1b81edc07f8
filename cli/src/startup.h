// The start-up step: what hpu-train takes from its environment before any
// subcommand runs. The Environment main() took is the only one; the
// subcommands hand it down to the layers, which parse their own settings
// from it (device::loadEmulatorSettings, comm::commSettingsFromEnv, ...).
// Not thread-safe: runs once, before any other thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "hpu/env/environment.h"

namespace hpu::cli {

// Sets the log level (HPU_LOG_LEVEL; `verbose`: debug), warns of HPU_*
// variables the catalogue does not list, and installs the fault plan
// (HPU_FAULT). Throws UsageError for a bad HPU_LOG_LEVEL, comm::EnvError for
// a bad HPU_FAULT.
void applyEnvironment(const Environment& env, bool verbose);

// The catalogued variable `name` was probably meant to be, if any: close by
// edit distance to its name, or to its name with one inner word left out
// (HPU_DEVICES for HPU_EMULATOR_DEVICES).
std::optional<std::string> closestVariable(std::string_view name);

}  // namespace hpu::cli
