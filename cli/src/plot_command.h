// hpu-train plot RUN... [--metrics a,b] [-o out.png|out.svg]
#pragma once

#include <CLI/CLI.hpp>

#include "hpu/core/app/plot.h"

namespace hpu::cli {

struct PlotArgs {
  core::PlotRequest request;
  CLI::App* command = nullptr;
};

// Adds the subcommand to `app`; `args` receives its options when it parses.
void setupPlotCommand(CLI::App& app, PlotArgs& args);
// Draws the chart and says where. Returns the exit code.
int runPlot(const PlotArgs& args);

}  // namespace hpu::cli
