// The config keys section of `hpu-train fit --help`, generated from the
// registered schemas: every trainer key and every init_arg of every
// registered component, each with type, default and doc.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hpu::cli {

std::string configKeysHelp();

// LightningCLI's `--KEY.help CLASS` among a subcommand's extra arguments
// (KEY: a key that takes a class, e.g. model, data, optimizer,
// trainer.callbacks): the help of CLASS's init_args, or nothing when no
// such argument is given. Throws UsageError for a key that takes no class,
// a missing CLASS, or an unknown one (with its close matches).
std::optional<std::string> classHelpRequest(const std::vector<std::string>& extras);

}  // namespace hpu::cli
