// hpu-train plot: the metrics of one or several runs as line charts, one
// panel per metric (x: the global step), one line per run, read from each
// run's metrics.csv and drawn by gnuplot (base/chart.h).
#pragma once

#include <string>
#include <vector>

namespace hpu::core {

struct PlotRequest {
  // Runs: a log directory holding metrics.csv (lightning_logs/version_0),
  // a metrics.csv file, or a folder of such directories (lightning_logs:
  // every version_* in it, in version order).
  std::vector<std::string> runs;
  std::vector<std::string> metrics;  // empty: every metric some run logged (not epoch)
  std::string output = "metrics.png"; // .png or .svg
};

// Draws the chart and returns the metrics drawn. Throws UsageError for a run
// without metrics.csv or a metric no run logged (naming the ones there are),
// DataError for a malformed metrics.csv.
std::vector<std::string> plotMetrics(const PlotRequest& request);

}  // namespace hpu::core
