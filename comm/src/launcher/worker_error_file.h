// Workers' error files (HPU_WORKER_ERROR_FILE): the folder a launcher makes
// for them, and the one format a worker writes and the launcher reads:
//   exit_code <N>
//   secondary <0|1>
//   <the message, one line each>
// Thread-safety: none needed; each file has one writer, read after it exited.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "hpu/comm/launcher.h"

namespace hpu::comm::detail {

// A private temporary folder (mkdtemp), removed with everything in it when
// destroyed. Throws LaunchError when it cannot be made.
class WorkerErrorFolder {
 public:
  WorkerErrorFolder();
  ~WorkerErrorFolder();
  WorkerErrorFolder(const WorkerErrorFolder&) = delete;
  WorkerErrorFolder& operator=(const WorkerErrorFolder&) = delete;

  std::filesystem::path fileFor(int localRank) const;

 private:
  std::filesystem::path path_;
};

// The report in `path`, or nothing when the worker wrote none (or a
// malformed one: it was killed while writing).
std::optional<WorkerErrorReport> readWorkerErrorFile(const std::filesystem::path& path);

}  // namespace hpu::comm::detail
