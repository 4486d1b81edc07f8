// Starting one worker process: fork, then in the child only async-signal-
// safe calls: PR_SET_PDEATHSIG(SIGKILL) (tied to the forking thread), exit
// if the parent is already gone, default SIGINT/SIGTERM and an empty signal
// mask, then execve. An exec failure comes back through a close-on-exec pipe.
// Thread-safety: may be called from any thread; the child dies with that thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace hpu::comm::detail {

struct SpawnRequest {
  std::string executable;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value"
  int stderrFd = -1;              // the child's stderr, when >= 0 (else inherited)
};

// The child's pid. Throws LaunchError (with errno's text) when fork or exec fails.
pid_t spawnWorker(const SpawnRequest& request);

// This process's argv, from /proc/self/cmdline.
std::vector<std::string> currentArgv();

}  // namespace hpu::comm::detail
