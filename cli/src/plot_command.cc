#include "plot_command.h"

#include <iostream>

namespace hpu::cli {

void setupPlotCommand(CLI::App& app, PlotArgs& args) {
  args.command = app.add_subcommand(
      "plot",
      "Draw the metrics of one or several runs (their metrics.csv) to a PNG or SVG: one panel per metric, one line per "
      "run, against the global step.");
  args.command->add_option("runs", args.request.runs,
                           "Runs: log directories (lightning_logs/version_0), metrics.csv files, or folders of version_N runs")
      ->required()
      ->type_name("RUN");
  args.command->add_option("--metrics", args.request.metrics, "Metrics to draw, comma-separated (default: all but epoch)")
      ->delimiter(',')
      ->type_name("A,B");
  args.command->add_option("-o,--output", args.request.output, "The image: .png or .svg")
      ->capture_default_str()
      ->type_name("FILE");
}

int runPlot(const PlotArgs& args) {
  const std::vector<std::string> drawn = core::plotMetrics(args.request);
  std::cout << "wrote " << args.request.output << " (";
  for (std::size_t i = 0; i < drawn.size(); ++i) std::cout << (i ? ", " : "") << drawn[i];
  std::cout << ")\n";
  return 0;
}

}  // namespace hpu::cli
