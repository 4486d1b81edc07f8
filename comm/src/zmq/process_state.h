// What the failure detector can see of a silent rank's process: on the
// detector's own host (the same host identity: name and boot id), the
// kernel's view of the pid it said hello with; elsewhere nothing, and it
// says so. This tells a dead rank (its process gone) from a slow one (it
// exists: frozen by a signal, or runnable on an overloaded host).
// Thread-safety: pure functions of /proc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hpu::comm::detail {

enum class ProcessState {
  kGone,      // no such process, or a zombie: it died
  kStopped,   // stopped by a signal (SIGSTOP, a debugger): frozen, not dead
  kAlive,     // running, runnable or sleeping: slow, not dead
  kNotHere,   // on another host: the detector cannot look
};

// The state of process `pid` of the host `hostId` (hostIdentity()).
ProcessState processState(std::uint32_t pid, std::string_view hostId);

// The clause a loss report ends with: "its process (pid 41 on node-a) is
// gone: it died", "... exists but is stopped (SIGSTOP or a debugger): frozen,
// not dead", "... exists: the process is alive but sent nothing (an
// overloaded host or a stuck rank), not dead", "on node-b: rank 3 cannot see
// whether its process (pid 41) exists" (`observer` is the detector's rank).
std::string describeProcessState(ProcessState state, std::uint32_t pid, std::string_view hostname, int observer);

}  // namespace hpu::comm::detail
