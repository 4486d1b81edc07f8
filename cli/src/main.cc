#include "hpu/cli/app.h"

int main(int argc, char** argv) { return hpu::cli::runCli(argc, argv); }
