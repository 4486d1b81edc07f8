// Child processes for the multi-process tests: started with an explicit
// environment, output (stdout and stderr) captured in a file, waited for
// with a deadline, and killed (SIGKILL) when the test lets go of them.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "hpu/env/environment.h"

namespace hpu::comm::test_support {

class Subprocess {
 public:
  using Clock = std::chrono::steady_clock;

  // With `ownProcessGroup` the child leads a process group of its own, and
  // the whole group is killed on the way out (a launcher such as mpirun and
  // the ranks it started).
  Subprocess(const std::string& executable, const std::vector<std::string>& args, const Environment& env,
             std::string outputPath, bool ownProcessGroup = false)
      : outputPath_(std::move(outputPath)), group_(ownProcessGroup) {
    std::vector<std::string> argvStrings{executable};
    argvStrings.insert(argvStrings.end(), args.begin(), args.end());
    std::vector<std::string> envStrings = env.entries();
    std::vector<char*> argv;
    for (auto& s : argvStrings) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& s : envStrings) envp.push_back(s.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, outputPath_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    if (group_) {
      posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
      posix_spawnattr_setpgroup(&attributes, 0);
    }
    const int rc = posix_spawn(&pid_, executable.c_str(), &actions, &attributes, argv.data(), envp.data());
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + executable);
  }

  ~Subprocess() {
    if (group_) ::kill(-pid_, SIGKILL);  // whatever of the group is left, the leader too
    if (!status_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }

  // The exit code (128 + signal when killed), or nullopt if it still runs at `deadline`.
  std::optional<int> wait(Clock::time_point deadline) {
    while (!status_) {
      int status = 0;
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return status_;
  }

  void signal(int sig) { ::kill(pid_, sig); }

  std::string output() const {
    std::ifstream in(outputPath_);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  // Waits (bounded) until the output contains `text`.
  bool waitForOutput(const std::string& text, Clock::time_point deadline) const {
    while (Clock::now() < deadline) {
      if (output().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  std::string outputPath_;
  bool group_ = false;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// True once no process with `pid` exists (bounded by `deadline`).
inline bool processGone(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  while (std::chrono::steady_clock::now() < deadline) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    // A zombie still answers kill(0): look at its state.
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = content.rfind(')');
    if (close != std::string::npos && close + 2 < content.size() && content[close + 2] == 'Z') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace hpu::comm::test_support
