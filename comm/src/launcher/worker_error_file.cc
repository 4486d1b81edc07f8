#include "worker_error_file.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <spdlog/fmt/fmt.h>

#include "hpu/comm/errors.h"

namespace hpu::comm {

bool reportErrorToLauncher(const Environment& env, const WorkerErrorReport& report) {
  const std::optional<std::string> path = env.get(kWorkerErrorFileVariable);
  if (!path || path->empty()) return false;
  // Written under another name and renamed: the launcher reads a whole
  // report or none.
  const std::string partial = *path + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    out << "exit_code " << report.exitCode << "\nsecondary " << (report.secondary ? 1 : 0) << "\n";
    for (const std::string& line : report.lines) out << line << "\n";
    out.flush();
    if (!out) return false;
  }
  return std::rename(partial.c_str(), path->c_str()) == 0;
}

namespace detail {

WorkerErrorFolder::WorkerErrorFolder() {
  std::error_code ec;
  std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string pattern = (base / "hpu-train-errors-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw LaunchError(fmt::format("cannot make a folder for the workers' error reports in {}: {}", base.string(),
                                  std::strerror(errno)));
  path_ = pattern;
}

WorkerErrorFolder::~WorkerErrorFolder() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path WorkerErrorFolder::fileFor(int localRank) const {
  return path_ / fmt::format("local_rank_{}", localRank);
}

std::optional<WorkerErrorReport> readWorkerErrorFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  WorkerErrorReport report;
  std::string key;
  int secondary = 0;
  if (!(in >> key) || key != "exit_code" || !(in >> report.exitCode)) return std::nullopt;
  if (!(in >> key) || key != "secondary" || !(in >> secondary)) return std::nullopt;
  report.secondary = secondary != 0;
  std::string line;
  std::getline(in, line);  // the end of the header
  while (std::getline(in, line)) report.lines.push_back(line);
  if (report.lines.empty()) return std::nullopt;
  return report;
}

}  // namespace detail
}  // namespace hpu::comm
