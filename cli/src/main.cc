#include "hpu/cli/app.h"

int main(int argc, char** argv, char** envp) { return hpu::cli::runCli(argc, argv, envp); }
