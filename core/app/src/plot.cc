#include "hpu/core/app/plot.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>

#include "hpu/core/base/chart.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"
#include "hpu/core/base/run_versions.h"
#include "hpu/core/config/scalars.h"

namespace hpu::core {
namespace {

namespace fs = std::filesystem;

struct Run {
  std::string name;
  std::map<std::string, ChartSeries> metrics;  // by column, x: step
};

std::vector<std::string> splitCommas(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

Run readRun(const fs::path& csv, const std::string& name) {
  std::stringstream in(readFile(csv.string()));
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = splitCommas(line);
  const auto step_col = std::find(header.begin(), header.end(), "step");
  if (step_col == header.end()) throw DataError(csv.string() + ": no 'step' column (is it a CSVLogger's metrics.csv?)");
  Run run{name, {}};
  for (int row = 2; std::getline(in, line); ++row) {
    const std::vector<std::string> cells = splitCommas(line);
    if (cells.size() != header.size())
      throw DataError(fmt::format("{}:{}: {} cells, the header has {}", csv.string(), row, cells.size(), header.size()));
    const auto step = config::parseFloat(cells[static_cast<std::size_t>(step_col - header.begin())]);
    if (!step) throw DataError(fmt::format("{}:{}: the step is not a number", csv.string(), row));
    for (std::size_t c = 0; c < header.size(); ++c) {
      if (header[c] == "step" || cells[c].empty()) continue;
      const auto v = config::parseFloat(cells[c]);
      if (!v) throw DataError(fmt::format("{}:{}: {} is not a number: '{}'", csv.string(), row, header[c], cells[c]));
      ChartSeries& s = run.metrics[header[c]];
      s.name = name;
      s.x.push_back(*step);
      s.y.push_back(*v);
    }
  }
  return run;
}

// The runs one argument names, with their legend names.
std::vector<std::pair<fs::path, std::string>> runsOf(const std::string& arg) {
  const fs::path p(arg);
  if (fs::is_regular_file(p)) return {{p, p.parent_path().filename().string()}};
  if (fs::is_regular_file(p / "metrics.csv")) return {{p / "metrics.csv", p.filename().string()}};
  std::vector<std::pair<fs::path, std::string>> out;
  for (const RunVersion& v : runVersions(p))
    if (fs::is_regular_file(v.dir / "metrics.csv")) out.emplace_back(v.dir / "metrics.csv", v.dir.filename().string());
  if (out.empty())
    throw UsageError(fmt::format("plot: {} has no metrics.csv (give a run's log directory, such as "
                                 "lightning_logs/version_0, its metrics.csv, or a folder of version_N runs)",
                                 arg));
  return out;
}

}  // namespace

std::vector<std::string> plotMetrics(const PlotRequest& request) {
  if (request.runs.empty()) throw UsageError("plot: name at least one run (hpu-train plot lightning_logs/version_0)");
  // Legends name each run by its folder, or by its path when two folders share a name.
  std::vector<std::pair<fs::path, std::string>> sources;
  for (const std::string& arg : request.runs)
    for (auto& source : runsOf(arg)) sources.push_back(std::move(source));
  std::map<std::string, int> named;
  for (const auto& [csv, name] : sources) ++named[name];
  std::vector<Run> runs;
  for (const auto& [csv, name] : sources)
    runs.push_back(readRun(csv, named[name] > 1 ? csv.parent_path().string() : name));
  std::vector<std::string> logged;
  for (const Run& r : runs)
    for (const auto& [k, s] : r.metrics)
      if (std::find(logged.begin(), logged.end(), k) == logged.end()) logged.push_back(k);
  std::sort(logged.begin(), logged.end());
  std::vector<std::string> metrics = request.metrics;
  if (metrics.empty())
    std::copy_if(logged.begin(), logged.end(), std::back_inserter(metrics), [](const std::string& k) { return k != "epoch"; });
  if (metrics.empty()) throw UsageError("plot: the runs logged no metrics yet");
  std::string listed;
  for (const std::string& k : logged) listed += (listed.empty() ? "" : ", ") + k;
  std::vector<ChartPanel> panels;
  for (const std::string& metric : metrics) {
    if (std::find(logged.begin(), logged.end(), metric) == logged.end())
      throw UsageError(fmt::format("plot: no run logged '{}'{}; logged: {}", metric, config::didYouMean(metric, logged),
                                   listed));
    ChartPanel panel{metric, "step", metric};
    for (const Run& run : runs) {
      auto it = run.metrics.find(metric);
      if (it == run.metrics.end()) continue;
      panel.series.push_back(it->second);
    }
    panels.push_back(std::move(panel));
  }
  drawChart(panels, request.output);
  return metrics;
}

}  // namespace hpu::core
