// The control plane at scale: rank 0's real RendezvousServer with N real
// ControlClients on loopback, many per process (no model, no data plane).
//
//   build/bench_control_plane --ranks 4096 --per-process 128 [--peer-timeout-ms 5000]
//                             [--steady-s 5] [--freeze]
//
// This process is rank 0 (the server and rank 0's client); it starts
// ceil((N - 2) / per-process) worker processes holding ranks 1..N-2 and one
// victim process holding rank N-1, and measures, printing one line each:
//   join        from the server's start to every rank holding the peer table,
//               split at the server admitting the last rank
//   startup     bytes the server received and sent per rank until then
//   steady      over --steady-s: the server process's CPU, its messages/s in
//               and out, and its CPU per rank (heartbeat cost per rank)
//   loss        from killing the victim (SIGKILL; --freeze: SIGSTOP) to the
//               last rank learning of it, against the peer timeout
//   restart     from that moment to a new round (new server, a new victim
//               process) having every rank joined again, as an elastic
//               restart's rendezvous
// Workers take line commands on stdin and answer on stdout; times are
// CLOCK_MONOTONIC (steady_clock), one clock for every process of the host.
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "hpu/comm/free_port.h"
#include "hpu/comm/job_token.h"
#include "hpu/env/environment.h"
#include "zmq/control_client.h"
#include "zmq/net.h"
#include "zmq/rendezvous_server.h"

extern char** environ;

namespace hpu::comm::bench {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using detail::ControlClient;
using detail::PeerHealth;

std::int64_t nowNs() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }
double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

struct Settings {
  int ranks = 1024;
  int perProcess = 128;
  milliseconds peerTimeout{5000};
  int steadySeconds = 5;
  bool freeze = false;
};

// A config of a real run's size (a flattened LightningCLI config: ~150 keys).
ConfigFingerprint benchConfig() {
  ConfigFingerprint config;
  for (int i = 0; i < 150; ++i) config.entries.emplace_back(fmt::format("trainer.option_{}", i), fmt::format("value {}", i));
  return config;
}

detail::ClientConfig clientConfig(const detail::JobKeys& keys, int rank, int worldSize, int port,
                                  milliseconds peerTimeout) {
  detail::ClientConfig c;
  c.serverEndpoint = fmt::format("tcp://127.0.0.1:{}", port);
  c.displayAddress = fmt::format("127.0.0.1:{}", port);
  c.security = detail::Security::kNone;
  c.keys = &keys;
  c.hello.rank = static_cast<std::uint32_t>(rank);
  c.hello.worldSize = static_cast<std::uint32_t>(worldSize);
  c.hello.nodeRank = static_cast<std::uint32_t>(rank / 8);
  c.hello.localRank = static_cast<std::uint32_t>(rank % 8);
  c.hello.pid = static_cast<std::uint32_t>(::getpid());
  c.hello.version = "bench";
  c.hello.config = benchConfig();
  c.hello.configDigest = c.hello.config.digest();
  c.hello.hostname = detail::hostName();
  c.hello.hostId = detail::hostIdentity();
  // What a rank publishes: its TCP listener and its ipc socket.
  c.hello.endpoints.tcpHost = "127.0.0.1";
  c.hello.endpoints.tcpPort = static_cast<std::uint16_t>(20000 + rank % 40000);
  c.hello.endpoints.ipcPid = static_cast<std::uint32_t>(::getpid());
  c.hello.endpoints.ipcNonce = 0x0123456789abcdefu + static_cast<std::uint64_t>(rank);
  c.rendezvousTimeout = std::chrono::minutes(2);
  c.peerTimeout = peerTimeout;
  c.heartbeatInterval = peerTimeout / 5;  // CommSettings::heartbeatInterval
  return c;
}

// The ranks one process holds: clients sharing one context.
class ClientSet {
 public:
  ClientSet(const detail::JobKeys& keys, int first, int count, int worldSize, int port, milliseconds peerTimeout)
      : context_(1) {
    context_.set(zmq::ctxopt::blocky, false);
    context_.set(zmq::ctxopt::max_sockets, 4 * count + 64);
    for (int r = first; r < first + count; ++r) {
      health_.push_back(std::make_shared<PeerHealth>(peerTimeout));
      clients_.push_back(std::make_unique<ControlClient>(context_, clientConfig(keys, r, worldSize, port, peerTimeout),
                                                         health_.back()));
    }
  }
  void awaitWelcome(Clock::time_point deadline) {
    for (auto& c : clients_) c->awaitWelcome(deadline);
  }
  // When the last of this process's ranks learned that `rank` failed (ns).
  std::int64_t awaitLoss(int rank, Clock::time_point deadline) {
    std::vector<std::int64_t> learned(health_.size(), 0);
    std::size_t pending = health_.size();
    while (pending > 0 && Clock::now() < deadline) {
      for (std::size_t i = 0; i < health_.size(); ++i) {
        if (learned[i] != 0) continue;
        if (auto f = health_[i]->firstFailure(); f && f->rank == rank) {
          learned[i] = nowNs();
          --pending;
        }
      }
      std::this_thread::sleep_for(milliseconds(1));
    }
    if (pending > 0) {
      // What the first of them knew instead (another rank's failure, rank 0 lost, nothing).
      std::string instead = "nothing";
      for (std::size_t i = 0; i < health_.size(); ++i) {
        if (learned[i] != 0) continue;
        if (auto f = health_[i]->firstFailure()) instead = f->reason;
        break;
      }
      throw std::runtime_error(
          fmt::format("{} ranks never learned that rank {} failed; the first of them knew: {}", pending, rank, instead));
    }
    return *std::max_element(learned.begin(), learned.end());
  }

 private:
  zmq::context_t context_;
  std::vector<std::shared_ptr<PeerHealth>> health_;
  std::vector<std::unique_ptr<ControlClient>> clients_;
};

// --- a worker process ------------------------------------------------------

int worker(int first, int count, int worldSize, milliseconds peerTimeout) {
  const JobToken token = JobToken::fromEnv(Environment::fromEntries(environ));
  const detail::JobKeys keys(token);
  std::unique_ptr<ClientSet> clients;
  std::string line;
  while (std::getline(std::cin, line)) {
    const auto space = line.find(' ');
    const std::string command = line.substr(0, space);
    const int argument = space == std::string::npos ? 0 : std::stoi(line.substr(space + 1));
    if (command == "join") {
      clients = std::make_unique<ClientSet>(keys, first, count, worldSize, argument, peerTimeout);
      clients->awaitWelcome(Clock::now() + std::chrono::minutes(2));
      std::cout << "joined" << std::endl;
    } else if (command == "watch") {
      std::cout << "learned " << clients->awaitLoss(argument, Clock::now() + peerTimeout * 4) << std::endl;
    } else if (command == "leave") {
      clients.reset();
      std::cout << "left" << std::endl;
    } else {
      return 0;
    }
  }
  return 0;
}

// --- rank 0 ----------------------------------------------------------------

struct Worker {
  pid_t pid = -1;
  FILE* in = nullptr;   // its commands
  FILE* out = nullptr;  // its answers

  void tell(const std::string& command) {
    std::fputs((command + "\n").c_str(), in);
    std::fflush(in);
  }
  std::string answer() {
    char buffer[256];
    if (std::fgets(buffer, sizeof buffer, out) == nullptr) throw std::runtime_error(fmt::format("worker {} died", pid));
    std::string text(buffer);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return text;
  }
};

// Every worker started, killed if the bench fails.
std::vector<pid_t> started;

Worker spawnWorker(const std::string& self, int first, int count, const Settings& s) {
  int toChild[2], fromChild[2];
  if (::pipe(toChild) != 0 || ::pipe(fromChild) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, toChild[0], 0);
  posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1);
  posix_spawn_file_actions_addclose(&actions, toChild[1]);
  posix_spawn_file_actions_addclose(&actions, fromChild[0]);
  std::vector<std::string> args{self,
                                "--worker",
                                std::to_string(first),
                                std::to_string(count),
                                std::to_string(s.ranks),
                                std::to_string(s.peerTimeout.count())};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  Worker w;
  if (posix_spawn(&w.pid, self.c_str(), &actions, nullptr, argv.data(), environ) != 0)
    throw std::runtime_error("cannot start a worker");
  posix_spawn_file_actions_destroy(&actions);
  started.push_back(w.pid);
  ::close(toChild[0]);
  ::close(fromChild[1]);
  w.in = ::fdopen(toChild[1], "w");
  w.out = ::fdopen(fromChild[0], "r");
  return w;
}

double cpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Rank 0 of one round: the server, then its own client.
struct RankZero {
  zmq::context_t context{1};
  std::unique_ptr<detail::RendezvousServer> server;
  std::unique_ptr<ClientSet> client;

  RankZero(const detail::JobKeys& keys, int port, const Settings& s) {
    context.set(zmq::ctxopt::blocky, false);
    context.set(zmq::ctxopt::max_sockets, s.ranks + 1024);
    detail::ServerConfig config;
    config.bindEndpoint = fmt::format("tcp://127.0.0.1:{}", port);
    config.displayAddress = fmt::format("127.0.0.1:{}", port);
    config.keys = &keys;
    config.worldSize = s.ranks;
    config.version = "bench";
    config.config = benchConfig();
    config.rendezvousTimeout = std::chrono::minutes(2);
    config.peerTimeout = s.peerTimeout;
    config.heartbeatInterval = s.peerTimeout / 5;
    server = std::make_unique<detail::RendezvousServer>(context, std::move(config));
    client = std::make_unique<ClientSet>(keys, 0, 1, s.ranks, port, s.peerTimeout);
  }
  ~RankZero() {
    client.reset();
    server->finish(Clock::now());
    server.reset();
  }
};

int coordinator(const std::string& self, const Settings& s) {
  if (s.ranks < 3) throw std::invalid_argument("--ranks must be at least 3 (rank 0, workers, the victim)");
  const JobToken token = JobToken::generate();
  ::setenv("HPU_JOB_TOKEN", token.secretForChildEnvironment().c_str(), 1);
  const detail::JobKeys keys(token);
  const int victimRank = s.ranks - 1;
  std::vector<Worker> workers;
  for (int first = 1; first < victimRank; first += s.perProcess)
    workers.push_back(spawnWorker(self, first, std::min(s.perProcess, victimRank - first), s));
  Worker victim = spawnWorker(self, victimRank, 1, s);
  fmt::print("{} ranks: rank 0 here, {} worker processes of up to {} ranks, rank {} alone; peer timeout {} ms\n",
             s.ranks, workers.size(), s.perProcess, victimRank, s.peerTimeout.count());

  // Join.
  int port = pickFreePort("127.0.0.1");
  const std::int64_t joinStart = nowNs();
  auto zero = std::make_unique<RankZero>(keys, port, s);
  for (auto* w : {&victim}) w->tell(fmt::format("join {}", port));
  for (auto& w : workers) w.tell(fmt::format("join {}", port));
  zero->client->awaitWelcome(Clock::now() + std::chrono::minutes(2));
  for (auto& w : workers) w.answer();
  victim.answer();
  const std::int64_t joined = nowNs();
  const detail::ServerTraffic& t = zero->server->traffic();
  const std::int64_t admitted = t.everyRankAdmittedNs.load();
  fmt::print("join      {:.3f} s for {} ranks (every rank admitted after {:.3f} s, then the peer table delivered to "
             "all in {:.3f} s)\n",
             seconds(joined - joinStart), s.ranks, seconds(admitted - joinStart), seconds(joined - admitted));
  fmt::print("startup   {:.0f} bytes received and {:.0f} bytes sent by the server per rank ({} messages in, {} out)\n",
             static_cast<double>(t.bytesIn) / s.ranks, static_cast<double>(t.bytesOut) / s.ranks,
             t.messagesIn.load(), t.messagesOut.load());

  // Steady state.
  std::this_thread::sleep_for(s.peerTimeout / 5);  // past the first heartbeats
  const double cpu0 = cpuSeconds();
  const std::uint64_t in0 = t.messagesIn, out0 = t.messagesOut;
  const auto steady0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(s.steadySeconds));
  const double wall = std::chrono::duration<double>(Clock::now() - steady0).count();
  const double cpu = cpuSeconds() - cpu0;
  fmt::print("steady    server process {:.1f}% of a core, {:.0f} messages/s in, {:.0f} out; {:.2f} us of CPU per "
             "rank per second\n",
             100 * cpu / wall, static_cast<double>(t.messagesIn - in0) / wall,
             static_cast<double>(t.messagesOut - out0) / wall, 1e6 * cpu / wall / s.ranks);

  // A rank's death.
  const std::int64_t killed = nowNs();
  ::kill(victim.pid, s.freeze ? SIGSTOP : SIGKILL);
  for (auto& w : workers) w.tell(fmt::format("watch {}", victimRank));
  std::int64_t last = zero->client->awaitLoss(victimRank, Clock::now() + s.peerTimeout * 4);
  for (auto& w : workers) {
    const std::string a = w.answer();
    last = std::max<std::int64_t>(last, std::stoll(a.substr(a.find(" ") + 1)));
  }
  fmt::print("loss      rank {} ({}) known to every rank after {:.3f} s (peer timeout {:.3f} s, goal {:.3f} s)\n",
             victimRank, s.freeze ? "SIGSTOP" : "SIGKILL", seconds(last - killed), s.peerTimeout.count() / 1e3,
             s.peerTimeout.count() / 1e3 + 1);
  if (s.freeze) ::kill(victim.pid, SIGKILL);
  ::waitpid(victim.pid, nullptr, 0);
  std::fclose(victim.in);
  std::fclose(victim.out);

  // Elastic restart: every rank leaves, a new round meets on a new port
  // with a new process for the lost rank.
  for (auto& w : workers) w.tell("leave");
  for (auto& w : workers) w.answer();
  zero.reset();
  victim = spawnWorker(self, victimRank, 1, s);
  port = pickFreePort("127.0.0.1");
  zero = std::make_unique<RankZero>(keys, port, s);
  victim.tell(fmt::format("join {}", port));
  for (auto& w : workers) w.tell(fmt::format("join {}", port));
  zero->client->awaitWelcome(Clock::now() + std::chrono::minutes(2));
  for (auto& w : workers) w.answer();
  victim.answer();
  fmt::print("restart   {:.3f} s from the loss known everywhere to every rank joined again\n",
             seconds(nowNs() - last));

  for (auto& w : workers) w.tell("leave");
  victim.tell("leave");
  for (auto& w : workers) w.answer();
  victim.answer();
  zero.reset();
  for (auto* w : {&victim}) w->tell("quit");
  for (auto& w : workers) w.tell("quit");
  for (auto& w : workers) ::waitpid(w.pid, nullptr, 0);
  ::waitpid(victim.pid, nullptr, 0);
  return 0;
}

}  // namespace
}  // namespace hpu::comm::bench

int main(int argc, char** argv) {
  using namespace hpu::comm::bench;
  spdlog::set_level(spdlog::level::warn);
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (!args.empty() && args[0] == "--worker") {
      ::signal(SIGPIPE, SIG_IGN);
      return worker(std::stoi(args.at(1)), std::stoi(args.at(2)), std::stoi(args.at(3)),
                    std::chrono::milliseconds(std::stoll(args.at(4))));
    }
    Settings s;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const auto value = [&] { return std::stoll(args.at(++i)); };
      if (args[i] == "--ranks") s.ranks = static_cast<int>(value());
      else if (args[i] == "--per-process") s.perProcess = static_cast<int>(value());
      else if (args[i] == "--peer-timeout-ms") s.peerTimeout = std::chrono::milliseconds(value());
      else if (args[i] == "--steady-s") s.steadySeconds = static_cast<int>(value());
      else if (args[i] == "--freeze") s.freeze = true;
      else throw std::invalid_argument("unknown option " + args[i] + " (see the header of bench_control_plane.cc)");
    }
    return coordinator("/proc/self/exe", s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_control_plane: %s\n", e.what());
    for (const pid_t pid : started) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    return 1;
  }
}
