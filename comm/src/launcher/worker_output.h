// A worker's stderr, read through a pipe: forwarded to this process's stderr
// in whole lines (so that ranks' lines never interleave mid-line), the last
// lines kept to quote when the worker fails.
// Thread-safety: none; the launcher's supervising thread owns it.
#pragma once

#include <deque>
#include <string>
#include <vector>

namespace hpu::comm::detail {

class WorkerOutput {
 public:
  static constexpr std::size_t kTailLines = 10;
  static constexpr std::size_t kMaxLineBytes = 4096;  // longer lines are forwarded in pieces

  // Takes ownership of `fd`, the read end of the worker's stderr pipe.
  explicit WorkerOutput(int fd);
  ~WorkerOutput();
  WorkerOutput(const WorkerOutput&) = delete;
  WorkerOutput& operator=(const WorkerOutput&) = delete;

  // The pipe, or -1 once the worker closed it.
  int fd() const { return fd_; }
  // Reads and forwards what is there without blocking; closes at end of file.
  void pump();
  // After the worker exited: reads to the end of the pipe (or until nothing
  // more comes, when a process it started still holds it) and forwards a
  // last unterminated line.
  void drain();
  // The last lines it wrote (at most kTailLines), oldest first.
  std::vector<std::string> lastLines() const { return {tail_.begin(), tail_.end()}; }

 private:
  void emit(std::string line);
  void close();

  int fd_;
  std::string partial_;
  std::deque<std::string> tail_;
};

}  // namespace hpu::comm::detail
