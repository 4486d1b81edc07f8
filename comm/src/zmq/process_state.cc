#include "process_state.h"

#include <fstream>

#include <spdlog/fmt/fmt.h>

#include "net.h"

namespace hpu::comm::detail {

ProcessState processState(std::uint32_t pid, std::string_view hostId) {
  if (hostId != hostIdentity()) return ProcessState::kNotHere;
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(in, line)) return ProcessState::kGone;
  // "pid (comm) state ...": the name may hold spaces and parentheses.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return ProcessState::kAlive;
  switch (line[close + 2]) {
    case 'Z':
    case 'X':
    case 'x':
      return ProcessState::kGone;
    case 'T':
    case 't':
      return ProcessState::kStopped;
    default:
      return ProcessState::kAlive;
  }
}

std::string describeProcessState(ProcessState state, std::uint32_t pid, std::string_view hostname, int observer) {
  switch (state) {
    case ProcessState::kGone:
      return fmt::format("its process (pid {} on {}) is gone: it died", pid, hostname);
    case ProcessState::kStopped:
      return fmt::format("its process (pid {} on {}) exists but is stopped (SIGSTOP or a debugger): frozen, not dead",
                         pid, hostname);
    case ProcessState::kAlive:
      return fmt::format("its process (pid {} on {}) exists and sent nothing: slow (an overloaded host or a stuck "
                         "rank), not dead",
                         pid, hostname);
    case ProcessState::kNotHere:
      break;
  }
  return fmt::format("on {}: rank {} cannot see whether its process (pid {}) exists", hostname, observer, pid);
}

}  // namespace hpu::comm::detail
