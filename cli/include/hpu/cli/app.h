// The hpu-train command line: subcommands fit, validate, test, predict
// (LightningCLI) and devices (the emulated hl-smi).
#pragma once

namespace hpu::cli {

// Parses argv, runs the subcommand and returns the process exit code:
// 0 ok, 2 usage or config error (nothing ran), 1 runtime failure. Errors are
// printed to stderr, one line each. `envp`: main()'s third argument, the
// process's environment; hpu-train reads its variables (env/catalogue.h)
// from this one snapshot and nowhere else.
int runCli(int argc, char** argv, char** envp);

}  // namespace hpu::cli
