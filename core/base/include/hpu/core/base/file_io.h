// Whole-file reads and atomic writes, for every file hpu-train writes
// (checkpoints, logs, profiler reports, predictions). Thread-safe.
#pragma once

#include <string>
#include <vector>

namespace hpu::core {

// Writes `bytes` to `path` atomically: a temporary file in the same
// directory, fsync, rename over `path`, fsync of the directory. Creates the
// directory if needed. A reader sees the old file or the new one, never a
// part. Throws CheckpointError naming the path and the system's reason.
void writeFileAtomically(const std::string& path, const std::string& bytes);
// Removes the temporaries writeFileAtomically left in `dir` because their
// writer died before renaming them (killed mid-write): those this host's
// processes wrote whose process is gone. Temporaries of live processes and of
// other hosts (a shared file system) stay. Returns the names removed.
std::vector<std::string> removeDeadTemporaries(const std::string& dir);
// The whole file. Throws CheckpointError naming the path and the reason.
std::string readFile(const std::string& path);

}  // namespace hpu::core
