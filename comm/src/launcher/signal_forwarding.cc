#include "signal_forwarding.h"

#include <atomic>
#include <cstdlib>

#include "../check.h"

namespace hpu::comm::detail {
namespace {

constexpr int kMaxForwarded = 1024;
std::atomic<pid_t> gWorkers[kMaxForwarded];
std::atomic<int> gPendingSignal{0};
std::atomic<bool> gInstalled{false};

static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "signal handlers need lock-free atomics");

void forward(int signal) {
  gPendingSignal.store(signal);
  int forwarded = 0;
  for (auto& slot : gWorkers) {
    const pid_t pid = slot.load(std::memory_order_relaxed);
    if (pid > 0 && ::kill(pid, signal) == 0) ++forwarded;
  }
  if (forwarded == 0) {  // no worker left to wait for: die of it now
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal, &action, nullptr);
    ::raise(signal);
  }
}

}  // namespace

SignalForwarding::SignalForwarding() {
  HPU_COMM_CHECK(!gInstalled.exchange(true), "only one LocalLauncher may exist at a time");
  for (auto& slot : gWorkers) slot.store(0);
  gPendingSignal.store(0);
  struct sigaction action {};
  action.sa_handler = &forward;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &previousInt_);
  sigaction(SIGTERM, &action, &previousTerm_);
}

SignalForwarding::~SignalForwarding() {
  sigaction(SIGINT, &previousInt_, nullptr);
  sigaction(SIGTERM, &previousTerm_, nullptr);
  for (auto& slot : gWorkers) slot.store(0);
  gInstalled.store(false);
}

void SignalForwarding::add(pid_t pid) {
  for (auto& slot : gWorkers) {
    pid_t empty = 0;
    if (slot.compare_exchange_strong(empty, pid)) return;
  }
  HPU_COMM_CHECK(false, "more than 1024 local workers");
}

void SignalForwarding::remove(pid_t pid) {
  for (auto& slot : gWorkers) {
    pid_t expected = pid;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

int SignalForwarding::pendingSignal() const { return gPendingSignal.load(); }

void SignalForwarding::dieOf(int signal) {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(signal);
  std::_Exit(128 + signal);
}

}  // namespace hpu::comm::detail
