#include "hpu/core/base/chart.h"

#include <fcntl.h>
#include <spawn.h>
#include <spdlog/fmt/fmt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "hpu/core/base/errors.h"
#include "hpu/core/base/file_io.h"

namespace hpu::core {
namespace {

namespace fs = std::filesystem;
constexpr auto kDeadline = std::chrono::seconds(60);

// A gnuplot string literal.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string script(const std::vector<ChartPanel>& panels, const std::string& out, bool svg) {
  const int height = 360 * static_cast<int>(panels.size());
  std::string s = svg ? fmt::format("set terminal svg size 800,{} dynamic background rgb 'white'\n", height)
                      : fmt::format("set terminal pngcairo size 800,{}\n", height);
  s += "set termoption noenhanced\nset output " + quoted(out) + "\n";
  s += "set grid\nset key outside right top\nset style data lines\n";
  s += fmt::format("set multiplot layout {},1\n", panels.size());
  for (const ChartPanel& p : panels) {
    s += "set title " + quoted(p.title) + "\nset xlabel " + quoted(p.x_label) + "\nset ylabel " + quoted(p.y_label) + "\n";
    s += p.log_x ? "set logscale x\nset format x '%.0e'\n" : "unset logscale x\nset format x '% h'\n";
    s += "unset label\n";
    std::string plot, data;
    for (const ChartSeries& series : p.series) {
      plot += (plot.empty() ? "plot " : ", ") + std::string("'-' using 1:2 with lines linewidth 2 title ") + quoted(series.name);
      for (std::size_t i = 0; i < series.x.size(); ++i)
        if (std::isfinite(series.x[i]) && std::isfinite(series.y[i]))
          data += fmt::format("{:.17g} {:.17g}\n", series.x[i], series.y[i]);
      data += "e\n";
    }
    if (p.mark) {
      s += fmt::format("set label 1 {} at {:.17g},{:.17g} offset 1,1\n", quoted(p.mark->label), p.mark->x, p.mark->y);
      plot += (plot.empty() ? "plot " : ", ") + std::string("'-' using 1:2 with points pointtype 7 pointsize 1.5 notitle");
      data += fmt::format("{:.17g} {:.17g}\ne\n", p.mark->x, p.mark->y);
    }
    if (plot.empty()) continue;
    s += plot + "\n" + data;
  }
  return s + "unset multiplot\nset output\n";
}

// Runs gnuplot on `script_path`, its messages into `log_path`; the exit
// status, or throws when it cannot start or passes the deadline.
int runGnuplot(const std::string& script_path, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::string name = "gnuplot";
  char* argv[] = {name.data(), const_cast<char*>(script_path.c_str()), nullptr};
  pid_t pid = 0;
  // gnuplot runs with no variables: no ~/.gnuplot, locale or terminal of the
  // user's changes a chart (the PATH that finds it is this process's).
  char* no_variables[] = {nullptr};
  const int rc = posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv, no_variables);
  posix_spawn_file_actions_destroy(&actions);
  if (rc == ENOENT)
    throw Error("drawing a chart needs gnuplot, which is not installed: apt-get install gnuplot-nox "
                "(scripts/install-deps.sh installs it)");
  if (rc != 0) throw Error(fmt::format("cannot start gnuplot: {}", std::strerror(rc)));
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      throw Error(fmt::format("gnuplot did not finish within {} s", kDeadline.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

void drawChart(const std::vector<ChartPanel>& panels, const std::string& path) {
  const bool svg = path.size() >= 4 && path.compare(path.size() - 4, 4, ".svg") == 0;
  const fs::path target = fs::absolute(path);
  fs::create_directories(target.parent_path());
  const std::string stem = fmt::format("{}/.{}.{}", target.parent_path().string(), target.filename().string(), ::getpid());
  const std::string tmp = stem + (svg ? ".tmp.svg" : ".tmp.png"), gp = stem + ".gp", log = stem + ".log";
  writeFileAtomically(gp, script(panels, tmp, svg));
  const int status = runGnuplot(gp, log);
  std::string messages = fs::exists(log) ? readFile(log) : "";
  std::error_code ec;
  fs::remove(gp, ec);
  fs::remove(log, ec);
  if (status != 0 || !fs::exists(tmp)) {
    fs::remove(tmp, ec);
    throw Error(fmt::format("gnuplot failed drawing {} (exit {}): {}", path, status, messages));
  }
  fs::rename(tmp, target, ec);
  if (ec) throw Error(fmt::format("cannot write {}: {}", path, ec.message()));
}

}  // namespace hpu::core
