// Whole-file reads and atomic writes, for every file hpu-train writes
// (checkpoints, logs, profiler reports, predictions). Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hpu::core {

// A file written in pieces and made visible whole: the bytes go to a
// temporary file in the target's directory (created if needed); commit()
// syncs it, renames it over the target and syncs the directory. A reader sees
// the old file or the new one, never a part; destroyed without commit(), the
// temporary is removed and the target left as it was. Every failure throws
// CheckpointError naming the path and the system's reason. Not thread-safe.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends `bytes`.
  void write(std::string_view bytes);
  // Overwrites bytes already written, from `offset` on.
  // REQUIRES: offset + bytes.size() <= the bytes written so far.
  void overwrite(std::uint64_t offset, std::string_view bytes);
  void commit();

 private:
  std::string path_, temporary_;
  int fd_ = -1;
};

// Writes `bytes` to `path` atomically (AtomicFile).
void writeFileAtomically(const std::string& path, const std::string& bytes);
// Removes the temporaries writeFileAtomically left in `dir` because their
// writer died before renaming them (killed mid-write): those this host's
// processes wrote whose process is gone. Temporaries of live processes and of
// other hosts (a shared file system) stay. Returns the names removed.
std::vector<std::string> removeDeadTemporaries(const std::string& dir);
// The whole file. Throws CheckpointError naming the path and the reason.
std::string readFile(const std::string& path);

}  // namespace hpu::core
