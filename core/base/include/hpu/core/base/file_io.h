// Whole-file reads and atomic writes, for every file hpu-train writes
// (checkpoints, logs, profiler reports, predictions). Thread-safe.
#pragma once

#include <string>

namespace hpu::core {

// Writes `bytes` to `path` atomically: a temporary file in the same
// directory, fsync, rename over `path`, fsync of the directory. Creates the
// directory if needed. A reader sees the old file or the new one, never a
// part. Throws CheckpointError naming the path and the system's reason.
void writeFileAtomically(const std::string& path, const std::string& bytes);
// The whole file. Throws CheckpointError naming the path and the reason.
std::string readFile(const std::string& path);

}  // namespace hpu::core
