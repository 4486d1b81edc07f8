// The hpu-train command line: subcommands fit, validate, test, predict
// (LightningCLI) and devices (the emulated hl-smi).
#pragma once

namespace hpu::cli {

// Parses argv, runs the subcommand and returns the process exit code:
// 0 ok, 2 usage or config error (nothing ran), 1 runtime failure. Errors are
// printed to stderr, one line each.
int runCli(int argc, char** argv);

}  // namespace hpu::cli
