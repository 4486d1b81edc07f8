#include "spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include <spdlog/fmt/fmt.h>

#include "hpu/comm/errors.h"

namespace hpu::comm::detail {
namespace {

std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void childFailed(int pipeFd) {
  const int error = errno;
  [[maybe_unused]] auto written = ::write(pipeFd, &error, sizeof error);
  ::_exit(127);
}

}  // namespace

pid_t spawnWorker(const SpawnRequest& request) {
  std::vector<char*> argv = pointers(request.argv);
  std::vector<char*> env = pointers(request.env);
  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0) {
    throw LaunchError(fmt::format("cannot create a pipe to start a worker: {}", std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(pipeFds[0]);
    ::close(pipeFds[1]);
    throw LaunchError(fmt::format("cannot fork a worker: {}", std::strerror(error)));
  }
  if (pid == 0) {
    ::close(pipeFds[0]);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) childFailed(pipeFds[1]);
    if (::getppid() != parent) ::_exit(128 + SIGKILL);  // the launcher died before we could watch it
    if (request.stderrFd >= 0 && ::dup2(request.stderrFd, STDERR_FILENO) < 0) childFailed(pipeFds[1]);
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, nullptr);
    ::sigaction(SIGTERM, &action, nullptr);
    sigset_t all;
    sigemptyset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    ::execve(request.executable.c_str(), argv.data(), env.data());
    childFailed(pipeFds[1]);
  }
  ::close(pipeFds[1]);
  int childErrno = 0;
  ssize_t n = 0;
  do {
    n = ::read(pipeFds[0], &childErrno, sizeof childErrno);
  } while (n < 0 && errno == EINTR);
  ::close(pipeFds[0]);
  if (n > 0) {
    ::waitpid(pid, nullptr, 0);
    throw LaunchError(fmt::format("cannot start {}: {}", request.executable, std::strerror(childErrno)));
  }
  return pid;
}

std::vector<std::string> currentArgv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  std::size_t start = 0;
  while (start < all.size()) {
    const std::size_t end = all.find('\0', start);
    argv.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return argv;
}

}  // namespace hpu::comm::detail
