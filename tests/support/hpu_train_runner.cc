#include "hpu_train_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace hpu::cli::testing {
namespace {

using Clock = std::chrono::steady_clock;

// How long to keep draining output after the deadline kill; a process that
// escaped the group could otherwise hold the pipes open forever.
constexpr std::chrono::seconds kDrainAfterKill{5};

[[noreturn]] void fail(const std::string& what, int err) { throw std::runtime_error(what + ": " + std::strerror(err)); }

// Owns both ends of a pipe; the write end goes to the child.
struct Pipe {
  int read = -1;
  int write = -1;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) fail("pipe2", errno);
    read = fds[0];
    write = fds[1];
  }
  ~Pipe() {
    closeRead();
    closeWrite();
  }
  void closeRead() {
    if (read >= 0) ::close(read);
    read = -1;
  }
  void closeWrite() {
    if (write >= 0) ::close(write);
    write = -1;
  }
};

// posix_spawn attributes and file actions, released on every path.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

// True once `pid` has exited; leaves it a zombie (WNOWAIT) so that its pid,
// and with it the process group id, cannot be reused before we reap it.
bool hasExited(pid_t pid) {
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) fail("waitid", errno);
  return info.si_pid == pid;
}

// Reads what is available on the open pipes, waiting at most `wait`.
// Closes a pipe at end of file.
void drain(Pipe& out, Pipe& err, std::string& out_text, std::string& err_text, std::chrono::milliseconds wait) {
  pollfd fds[2];
  int n = 0;
  if (out.read >= 0) fds[n++] = {out.read, POLLIN, 0};
  if (err.read >= 0) fds[n++] = {err.read, POLLIN, 0};
  const int ready = ::poll(n ? fds : nullptr, static_cast<nfds_t>(n), static_cast<int>(wait.count()));
  if (ready < 0 && errno != EINTR) fail("poll", errno);
  for (int i = 0; i < n && ready > 0; ++i) {
    if (fds[i].revents == 0) continue;
    Pipe& p = fds[i].fd == out.read ? out : err;
    std::string& text = fds[i].fd == out.read ? out_text : err_text;
    char buf[65536];
    const ssize_t got = ::read(p.read, buf, sizeof buf);
    if (got > 0)
      text.append(buf, static_cast<std::size_t>(got));
    else if (got == 0 || errno != EINTR)
      p.closeRead();
  }
}

}  // namespace

std::string RunResult::describe() const {
  std::ostringstream s;
  if (timed_out)
    s << "timed out";
  else if (signal != 0)
    s << "killed by signal " << signal;
  else
    s << "exit " << exit_code;
  s << "\n--- stdout ---\n" << out << "--- stderr ---\n" << err;
  return s.str();
}

RunResult runProgram(const std::filesystem::path& binary, const std::vector<std::string>& args,
                     const RunOptions& options) {
  std::vector<std::string> argv_text{binary.string()};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_text;
  for (const auto& [k, v] : options.env) env_text.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);

  Pipe out, err;
  SpawnSetup setup;
  posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, out.write, 1);
  posix_spawn_file_actions_adddup2(&setup.actions, err.write, 2);
  posix_spawn_file_actions_addchdir_np(&setup.actions, options.cwd.c_str());
  // Its own process group, so that the deadline kill reaches every process it
  // starts; default signal handling and an empty mask whatever the test runner has.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&setup.attr, 0);
  posix_spawnattr_setsigmask(&setup.attr, &none);
  posix_spawnattr_setsigdefault(&setup.attr, &all);

  RunResult r;
  const auto start = Clock::now();
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, binary.c_str(), &setup.actions, &setup.attr, argv.data(), envp.data());
  if (rc != 0) fail("cannot start " + binary.string(), rc);
  out.closeWrite();
  err.closeWrite();

  const auto deadline = start + options.timeout;
  bool exited = false, killed = false;
  while (out.read >= 0 || err.read >= 0 || !exited) {
    const auto now = Clock::now();
    if (!killed && now >= deadline) {
      ::kill(-pid, SIGKILL);
      killed = r.timed_out = true;
    }
    if (killed && now >= deadline + kDrainAfterKill) break;
    drain(out, err, r.out, r.err, std::chrono::milliseconds(exited ? 100 : 10));
    if (!exited && hasExited(pid)) {
      exited = true;
      ::kill(-pid, SIGKILL);  // workers it left behind hold the pipes open
    }
  }
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) fail("waitpid", errno);
  r.wall = Clock::now() - start;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

ScratchDir::ScratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = (std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / "hpu-cli-test-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) fail("mkdtemp " + templ, errno);
  path_ = templ;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f.flush()) throw std::runtime_error("cannot write " + path.string());
}

std::filesystem::path sourcePath(const std::string& relative) { return std::filesystem::path(HPU_SOURCE_DIR) / relative; }

bool processEnded(const std::string& pid, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    std::ifstream stat("/proc/" + pid + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    const auto close = line.rfind(')');  // the state follows the command name
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string boringConfig() { return HPU_SOURCE_DIR "/tests/support/boring.yaml"; }

RunResult HpuTrainTest::run(const std::vector<std::string>& args) {
  RunOptions o;
  o.cwd = scratch_.path();
  o.env = env_;
  RunResult r = runProgram(HPU_TRAIN_BIN, args, o);
  EXPECT_FALSE(r.timed_out) << r.describe();
  return r;
}

RunResult HpuTrainTest::runScript(const std::string& name, const std::vector<std::string>& args,
                                  std::chrono::milliseconds timeout) {
  RunOptions o;
  o.cwd = scratch_.path();
  o.env = env_;
  o.env["PATH"] = "/usr/bin:/bin";
  o.timeout = timeout;
  std::vector<std::string> full{HPU_SOURCE_DIR "/scripts/" + name};
  full.insert(full.end(), args.begin(), args.end());
  RunResult r = runProgram("/bin/bash", full, o);
  EXPECT_FALSE(r.timed_out) << r.describe();
  return r;
}

std::string HpuTrainTest::trainBinary() { return HPU_TRAIN_BIN; }

std::string HpuTrainTest::printConfig(const std::vector<std::string>& args, const std::string& flags) {
  std::vector<std::string> full{"fit"};
  full.insert(full.end(), args.begin(), args.end());
  full.push_back(flags.empty() ? "--print_config" : "--print_config=" + flags);
  const RunResult r = run(full);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err, "");
  return r.out;
}

std::string HpuTrainTest::write(const std::string& name, const std::string& text) {
  writeFile(scratch_.path() / name, text);
  return name;
}

std::string HpuTrainTest::read(const std::string& name) const { return readFile(scratch_.path() / name); }

}  // namespace hpu::cli::testing
