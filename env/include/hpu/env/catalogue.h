// The catalogue: every environment variable the product reads, with its
// meaning, what applies when it is unset, and the settings it feeds. One
// table, which Environment::get() checks names against, `hpu-train --help`
// prints and docs/environment.md lists (a test holds all three together).
// Thread-safety: constant data.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hpu/env/environment.h"

namespace hpu::env {

enum class Group {
  kEmulator,       // the emulated HPU (device::EmulatorSettings, kernels)
  kLaunch,         // where a process stands in a job (comm::ClusterEnvironment)
  kCommunication,  // timeouts, collectives' backend, the job token
  kRestarts,       // the elastic agent and the ranks it starts
  kTraining,       // seed, threads, precision, DeepSpeed
  kConfig,         // config values from the environment
  kLogging,        // log level, MLflow
  kTesting,        // test builds only
  kRepository,     // the repository's scripts and tests; hpu-train ignores them
};

struct Variable {
  std::string_view name;  // or a family's pattern: PL_<SUBCOMMAND>__<KEY>
  Group group;
  std::string_view default_value;  // what applies when it is unset
  std::string_view meaning;
  std::string_view feeds;  // the settings it feeds: a type's field, a function, a config key
};

// Every variable, grouped in Group's order.
std::span<const Variable> catalogue();
// The entry named exactly `name` (a family's members are not), or nullptr.
const Variable* findVariable(std::string_view name);
std::string_view groupTitle(Group group);

// The HPU_* variables of `env` that the catalogue does not list (typos, or
// settings of another version), sorted.
std::vector<std::string> unknownProductVariables(const Environment& env);

// The catalogue as `hpu-train --help` prints it: the variables hpu-train
// reads, by group, each with its default and meaning.
std::string describeCatalogue();

}  // namespace hpu::env
