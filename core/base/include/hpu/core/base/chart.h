// Line charts, drawn by gnuplot (Debian's gnuplot-nox) into PNG or SVG: a
// figure of panels stacked vertically, each with its title, axes and one
// line per series, optionally a marked point. hpu-train plot draws metrics
// with it, LearningRateFinder its loss curve. Thread-safe (no shared state).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hpu::core {

struct ChartSeries {
  std::string name;         // the legend's entry
  std::vector<double> x, y; // REQUIRES: the same length
};

struct ChartPanel {
  std::string title, x_label, y_label;
  bool log_x = false;
  std::vector<ChartSeries> series;
  struct Mark {
    double x, y;
    std::string label;
  };
  std::optional<Mark> mark;  // a point drawn over the lines, with its label
};

// Draws `panels` into `path`: SVG when it ends in ".svg", else PNG. The file
// is replaced atomically. Throws Error when gnuplot is missing (naming the
// package), fails (with its message), or runs past 60 s.
void drawChart(const std::vector<ChartPanel>& panels, const std::string& path);

}  // namespace hpu::core
