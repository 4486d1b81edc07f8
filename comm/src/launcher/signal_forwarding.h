// SIGINT / SIGTERM forwarding from the launcher to its workers. A signal
// handler can only reach process-global state, so the worker pids live in a
// fixed table of atomics; this is comm/'s one global, owned by at most one
// SignalForwarding at a time. The handler records the signal, forwards it to
// every registered worker, and when none is left the process dies of it at
// once; otherwise the launcher's supervisor calls dieOf() once they exited.
// Thread-safety: add/remove/pendingSignal are lock-free and may be called
// from any thread.
#pragma once

#include <signal.h>
#include <sys/types.h>

namespace hpu::comm::detail {

class SignalForwarding {
 public:
  // Installs the handlers. REQUIRES: no other SignalForwarding alive.
  SignalForwarding();
  // Restores the previous handlers.
  ~SignalForwarding();
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

  // REQUIRES: fewer than 1024 pids registered.
  void add(pid_t pid);
  void remove(pid_t pid);
  // The last SIGINT / SIGTERM received, or 0.
  int pendingSignal() const;
  // Restores the default action of `signal` and raises it: the process dies
  // of it, as it would have without the launcher.
  [[noreturn]] void dieOf(int signal);

 private:
  struct sigaction previousInt_ {};
  struct sigaction previousTerm_ {};
};

}  // namespace hpu::comm::detail
