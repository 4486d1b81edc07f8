// The ZeroMQ rendezvous, store and data plane with ranks as threads of this
// process (each with its own ZeroMQ context), on 127.0.0.1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include <spdlog/fmt/fmt.h>
#include <zmq.hpp>

#include "log_capture.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/free_port.h"
#include "hpu/comm/rendezvous.h"
#include "rank_threads.h"

namespace hpu::comm {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using test_support::messageOf;

const Environment kTokenEnv{{"HPU_JOB_TOKEN", "test-token-0123456789abcdef"}};

struct Job {
  int worldSize;
  int port = pickFreePort("127.0.0.1");

  JoinOptions optionsFor(int rank) const {
    JoinOptions options;
    options.cluster.masterAddr = "127.0.0.1";
    options.cluster.masterPort = port;
    options.cluster.worldSize = worldSize;
    options.cluster.globalRank = rank;
    options.cluster.localRank = rank;
    options.cluster.localWorldSize = worldSize;
    options.settings.rendezvousTimeout = 20s;
    options.settings.peerTimeout = 2s;
    options.settings.group.timeout = 20s;
    options.token = JobToken::fromEnv(kTokenEnv);
    options.version = "1.2.3";
    options.config.entries = {{"trainer.devices", std::to_string(worldSize)}, {"trainer.precision", "bf16-mixed"}};
    options.progressInterval = 200ms;
    return options;
  }
};

// Joins every rank on its own thread with options from `adjust(rank)`, runs
// `body` on the groups that joined, and returns what each rank threw.
std::vector<std::exception_ptr> joinAll(const Job& job, const std::function<void(int, JoinOptions&)>& adjust,
                                        const std::function<void(ProcessGroup&)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(job.worldSize));
  std::vector<std::thread> threads;
  for (int r = 0; r < job.worldSize; ++r) {
    threads.emplace_back([&, r] {
      try {
        JoinOptions options = job.optionsFor(r);
        adjust(r, options);
        auto group = joinProcessGroup(options);
        body(*group);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

void noAdjustment(int, JoinOptions&) {}

class RendezvousWorldSizes : public ::testing::TestWithParam<int> {};

TEST_P(RendezvousWorldSizes, EveryRankJoinsAndCollectivesAndStoreWork) {
  const Job job{GetParam()};
  auto errors = joinAll(job, noAdjustment, [&](ProcessGroup& pg) {
    EXPECT_EQ(pg.size(), job.worldSize);
    std::vector<float> small(7, float(pg.rank() + 1));
    pg.allreduce(small, ReduceOp::kSum);
    const float expected = float(job.worldSize * (job.worldSize + 1) / 2);
    for (float v : small) EXPECT_EQ(v, expected);
    std::vector<float> large(300'001, 1.0f);
    pg.allreduce(large, ReduceOp::kAvg);
    for (float v : large) ASSERT_EQ(v, 1.0f);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    pg.store().set("rank/" + std::to_string(pg.rank()), std::to_string(pg.rank() * 10), deadline);
    EXPECT_EQ(pg.store().add("counter", 2, deadline) % 2, 0);
    const int next = (pg.rank() + 1) % pg.size();
    EXPECT_EQ(pg.store().get("rank/" + std::to_string(next), deadline), std::to_string(next * 10));
    pg.barrier("counted");
    EXPECT_EQ(pg.store().add("counter", 0, deadline), 2 * job.worldSize);
    std::vector<std::string> keys;
    for (int r = 0; r < pg.size(); ++r) keys.push_back("rank/" + std::to_string(r));
    pg.store().wait(keys, deadline);
    pg.barrier("done");
  });
  test_support::rethrowFirst(errors);
}

INSTANTIATE_TEST_SUITE_P(Threads, RendezvousWorldSizes, ::testing::Range(1, 9),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(Rendezvous, EncryptedJobAssemblesAndReduces) {
  const Job job{3};
  auto errors = joinAll(job, [](int, JoinOptions& o) { o.encryptLoopback = true; }, [](ProcessGroup& pg) {
    std::vector<float> data(100'000, 2.0f);
    pg.allreduce(data, ReduceOp::kSum);
    for (float v : data) ASSERT_EQ(v, 6.0f);
  });
  test_support::rethrowFirst(errors);
}

TEST(Rendezvous, ConfigMismatchIsNamedOnEveryRank) {
  const Job job{3};
  auto errors = joinAll(
      job,
      [](int r, JoinOptions& o) {
        if (r == 2) o.config.entries[1].second = "32-true";
      },
      [](ProcessGroup&) { FAIL() << "the job must not assemble"; });
  const std::string reason = "rank 2: config differs from rank 0 at trainer.precision: 32-true vs bf16-mixed";
  EXPECT_EQ(messageOf<RendezvousError>(errors[2]), reason);
  // Ranks admitted before rank 2 arrived hear it from rank 0; later ones are refused with it.
  EXPECT_THAT(messageOf<RendezvousError>(errors[0]), HasSubstr("rank 0: rendezvous failed: " + reason));
  EXPECT_THAT(messageOf<RendezvousError>(errors[1]), HasSubstr("rank 1: rendezvous failed: " + reason));
}

TEST(Rendezvous, VersionMismatchIsNamed) {
  const Job job{2};
  auto errors = joinAll(
      job, [](int r, JoinOptions& o) { if (r == 1) o.version = "9.9.9"; },
      [](ProcessGroup&) { FAIL() << "the job must not assemble"; });
  EXPECT_THAT(messageOf<RendezvousError>(errors[1]),
              HasSubstr("rank 1: program version 9.9.9 differs from rank 0's 1.2.3"));
  EXPECT_THAT(messageOf<RendezvousError>(errors[0]), HasSubstr("rank 1: program version 9.9.9"));
}

TEST(Rendezvous, WorldSizeMismatchIsNamed) {
  const Job job{2};
  auto errors = joinAll(
      job,
      [](int r, JoinOptions& o) {
        if (r == 1) o.cluster.worldSize = 4;
      },
      [](ProcessGroup&) { FAIL() << "the job must not assemble"; });
  EXPECT_THAT(messageOf<RendezvousError>(errors[1]), HasSubstr("rank 1: world size 4 differs from rank 0's 2"));
}

TEST(Rendezvous, DuplicateRankFailsTheRendezvous) {
  const Job job{3};
  auto errors = joinAll(
      job,
      [](int r, JoinOptions& o) {
        if (r == 2) o.cluster.globalRank = 1;  // two processes claim rank 1, nobody is rank 2
      },
      [](ProcessGroup&) { FAIL() << "the job must not assemble"; });
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(messageOf<RendezvousError>(errors[static_cast<std::size_t>(r)]),
                ::testing::ContainsRegex("rank 1 joined twice: pid [0-9]+ on .* \\(node 0, local rank [12]\\) and "
                                         "pid [0-9]+ on .* \\(node 0, local rank [12]\\); every node needs its own "
                                         "NODE_RANK"));
  }
}

TEST(Rendezvous, TimeoutNamesTheMissingRank) {
  Job job{4};
  auto errors = joinAll(
      Job{3, job.port},
      [](int, JoinOptions& o) {
        o.cluster.worldSize = 4;
        o.settings.rendezvousTimeout = 1500ms;
      },
      [](ProcessGroup&) { FAIL() << "the job must not assemble"; });
  EXPECT_THAT(messageOf<RendezvousError>(errors[0]),
              HasSubstr("timed out after 1.5s: 3/4 ranks joined, missing: 3; start every node with the same "
                        "MASTER_ADDR, MASTER_PORT and WORLD_SIZE"));
  EXPECT_THAT(messageOf<RendezvousError>(errors[1]), HasSubstr("missing: 3"));
}

TEST(Rendezvous, RankWithoutRankZeroGivesUpAtItsDeadline) {
  Job job{2};
  JoinOptions options = job.optionsFor(1);
  options.settings.rendezvousTimeout = 700ms;
  try {
    joinProcessGroup(options);
    FAIL() << "joined without rank 0";
  } catch (const RendezvousError& e) {
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("rank 1: no answer from rank 0 at 127.0.0.1:{} within 700ms", job.port)));
  }
}

TEST(Rendezvous, PortInUseNamesAddressAndSuggestsAnotherPort) {
  Job job{2};
  zmq::context_t context;
  zmq::socket_t squatter(context, zmq::socket_type::router);
  squatter.set(zmq::sockopt::linger, 0);
  squatter.bind(fmt::format("tcp://127.0.0.1:{}", job.port));
  try {
    joinProcessGroup(job.optionsFor(0));
    FAIL() << "bound a port in use";
  } catch (const RendezvousError& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("rank 0 cannot listen on 127.0.0.1:{}: address already in use (another job or process holds "
                          "port {}); choose another MASTER_PORT",
                          job.port, job.port));
  }
}

TEST(Rendezvous, WrongTokenIsRefusedAndTheJobCarriesOn) {
  for (bool encrypted : {false, true}) {
    SCOPED_TRACE(encrypted ? "CURVE" : "loopback");
    const Job job{2};
    std::exception_ptr intruderError;
    std::atomic<bool> intruderDone{false};
    std::thread intruder([&] {
      JoinOptions options = job.optionsFor(1);
      options.token = JobToken::fromEnv({{"HPU_JOB_TOKEN", "another-token-0123456789"}});
      options.encryptLoopback = encrypted;
      options.settings.rendezvousTimeout = 10s;
      try {
        joinProcessGroup(options);
      } catch (...) {
        intruderError = std::current_exception();
      }
      intruderDone = true;
    });
    auto errors = joinAll(job, [&](int, JoinOptions& o) { o.encryptLoopback = encrypted; }, [&](ProcessGroup& pg) {
      std::vector<float> data(10, 1.0f);
      pg.allreduce(data, ReduceOp::kSum);
      EXPECT_EQ(data[0], 2.0f);
      // Rank 0's server stays up until the intruder has its answer.
      for (int i = 0; i < 200 && !intruderDone; ++i) std::this_thread::sleep_for(50ms);
      pg.barrier("intruder_answered");
    });
    intruder.join();
    test_support::rethrowFirst(errors);
    EXPECT_THAT(messageOf<RendezvousError>(intruderError),
                encrypted ? HasSubstr("refused this process's encrypted handshake: its job token differs")
                          : HasSubstr("rank 1: job token does not match rank 0's"));
  }
}

TEST(Rendezvous, GarbageFramesAreLoggedAndDoNotHurtRankZero) {
  const Job job{2};
  test_support::LogCapture log;
  std::exception_ptr rankZeroError;
  std::thread rankZero([&] {
    try {
      auto group = joinProcessGroup(job.optionsFor(0));
      group->barrier("survived");
    } catch (...) {
      rankZeroError = std::current_exception();
    }
  });
  {
    zmq::context_t context;
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.connect(fmt::format("tcp://127.0.0.1:{}", job.port));  // connects once rank 0 listens
    for (std::string junk : {std::string("hello?"), std::string(3, '\0'), std::string("HPUR\x02\x01", 6),
                             std::string("HPUR\x02\x05garbage", 13), std::string(100'000, 'x')}) {
      dealer.send(zmq::buffer(junk), zmq::send_flags::none);
    }
    zmq::socket_t multipart(context, zmq::socket_type::dealer);
    multipart.set(zmq::sockopt::linger, 0);
    multipart.connect(fmt::format("tcp://127.0.0.1:{}", job.port));
    multipart.send(zmq::str_buffer("part one"), zmq::send_flags::sndmore);
    multipart.send(zmq::str_buffer("part two"), zmq::send_flags::none);
    // Repeats from one address within 10 s are counted, not logged.
    EXPECT_TRUE(log.waitFor("rank 0: dropped a malformed rendezvous message from 127.0.0.1: ", 10s));
  }
  std::exception_ptr rankOneError;
  try {
    auto group = joinProcessGroup(job.optionsFor(1));
    group->barrier("survived");
  } catch (...) {
    rankOneError = std::current_exception();
  }
  rankZero.join();
  test_support::rethrowFirst({rankZeroError, rankOneError});
}

TEST(Rendezvous, NoTokenOnANonLoopbackAddressIsAnEnvError) {
  Job job{2};
  JoinOptions options = job.optionsFor(1);
  options.cluster.masterAddr = "192.0.2.10";
  options.token = JobToken();
  try {
    joinProcessGroup(options);
    FAIL() << "joined without a token";
  } catch (const EnvError& e) {
    EXPECT_THAT(e.what(), HasSubstr("HPU_JOB_TOKEN (or HPU_JOB_TOKEN_FILE) is required: MASTER_ADDR=192.0.2.10 is "
                                    "not a loopback address"));
  }
}

TEST(Rendezvous, StoreTimeoutsAndBadValuesAreReported) {
  const Job job{2};
  auto errors = joinAll(job, noAdjustment, [](ProcessGroup& pg) {
    const auto now = std::chrono::steady_clock::now();
    if (pg.rank() == 1) {
      try {
        pg.store().get("never-set", now + 300ms);
        ADD_FAILURE() << "get of a missing key returned";
      } catch (const CommTimeoutError& e) {
        EXPECT_EQ(std::string(e.what()), "store get 'never-set' timed out: no rank set it before the deadline");
      }
      pg.store().set("text", "not a number", now + 5s);
      try {
        pg.store().add("text", 1, now + 5s);
        ADD_FAILURE() << "add on text returned";
      } catch (const CommError& e) {
        EXPECT_EQ(std::string(e.what()), "store add 'text': the current value is not an integer");
      }
    }
    pg.barrier("checked");
  });
  test_support::rethrowFirst(errors);
}

TEST(Rendezvous, AbortingRankFailsTheOthersAtOnce) {
  const Job job{3};
  std::vector<std::string> messages(3);
  auto errors = joinAll(job, noAdjustment, [&](ProcessGroup& pg) {
    std::vector<float> data(1000, 1.0f);
    pg.allreduce(data, ReduceOp::kSum);
    if (pg.rank() == 2) {
      pg.abort("loss is NaN");
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      pg.barrier("never_completes", CollectiveOptions{.timeout = 30s});
      ADD_FAILURE() << "barrier completed without rank 2";
    } catch (const PeerLostError& e) {
      EXPECT_EQ(e.rank(), 2);
      messages[static_cast<std::size_t>(pg.rank())] = e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  });
  test_support::rethrowFirst(errors);
  EXPECT_THAT(messages[0], HasSubstr("rank 0: barrier #1 'never_completes' failed: rank 2 aborted: loss is NaN"));
  EXPECT_THAT(messages[1], HasSubstr("rank 2 aborted: loss is NaN"));
}

// A process that did not run (stopped here; an oversubscribed host alike)
// blames nobody for the silence that follows: neither rank 0's server nor a
// rank's control client declares a peer lost once it runs again.
TEST(Rendezvous, AProcessThatDidNotRunBlamesNoPeerForItsSilence) {
  const Job job{2};
  auto errors = joinAll(
      job, [](int, JoinOptions& options) { options.settings.peerTimeout = 1s; },
      [&](ProcessGroup& pg) {
        std::vector<float> data(3, 1.0f);
        pg.allreduce(data, ReduceOp::kSum);
        pg.barrier("before the stop");
        if (pg.rank() == 0) {
          const pid_t self = ::getpid();
          const pid_t waker = ::fork();
          if (waker == 0) {  // only async-signal-safe calls here
            const timespec pause{3, 0};  // three peer timeouts
            ::nanosleep(&pause, nullptr);
            ::kill(self, SIGCONT);
            ::_exit(0);
          }
          ::kill(self, SIGSTOP);
          ::waitpid(waker, nullptr, 0);
        }
        std::this_thread::sleep_for(500ms);  // the detectors' turns after the stop
        data.assign(3, 1.0f);
        pg.allreduce(data, ReduceOp::kSum);
        EXPECT_EQ(data[0], 2.0f);
      });
  test_support::rethrowFirst(errors);
}

// The launcher aborts rank 0's group from its supervising thread when a local
// worker dies: the collective rank 0 is blocked in must fail at once, not at
// its timeout (rank 1 stays alive, so no heartbeat would ever fail it).
TEST(Rendezvous, AbortFailsThisRanksCollectiveInFlight) {
  const Job job{2};
  std::atomic<bool> aborted{false};
  auto errors = joinAll(job, noAdjustment, [&](ProcessGroup& pg) {
    if (pg.rank() == 1) {
      while (!aborted) std::this_thread::sleep_for(10ms);
      try {
        pg.barrier("after_the_abort");
        ADD_FAILURE() << "rank 1's barrier completed";
      } catch (const PeerLostError& e) {
        EXPECT_EQ(e.rank(), 0);
      }
      return;
    }
    std::chrono::steady_clock::time_point abortedAt;
    std::thread supervisor([&] {
      std::this_thread::sleep_for(300ms);
      abortedAt = std::chrono::steady_clock::now();
      pg.abort("local worker failed");
      aborted = true;
    });
    std::exception_ptr error;
    try {
      pg.barrier("waits_for_rank_1", CollectiveOptions{.timeout = 20s});
    } catch (...) {
      error = std::current_exception();
    }
    const auto failedAt = std::chrono::steady_clock::now();
    supervisor.join();
    ASSERT_TRUE(error) << "rank 0's barrier completed";
    EXPECT_LT(failedAt - abortedAt, 1s);
    EXPECT_THAT(messageOf<PeerLostError>(error),
                HasSubstr("rank 0: barrier #0 'waits_for_rank_1' failed: rank 0 aborted: local worker failed"));
  });
  test_support::rethrowFirst(errors);
}

// Ranks of one node exchange large messages through shared-memory lanes; a
// broadcast of 64 chunks outruns a lane's slots, so later chunks take the
// socket while earlier ones wait in slots, and every rank must still see
// them in order. Nothing is left in /dev/shm afterwards.
TEST(Rendezvous, LargeMessagesWithinANodeKeepTheirOrderAcrossLanesAndSockets) {
  const Job job{3};
  constexpr std::size_t kCount = 64 * (256 << 10) / sizeof(float);
  auto errors = joinAll(job, noAdjustment, [&](ProcessGroup& pg) {
    for (int root : {0, 2}) {
      std::vector<float> data(kCount, -1.0f);
      if (pg.rank() == root) {
        for (std::size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>(i % 1000003) + static_cast<float>(root);
      }
      pg.broadcast(std::span<float>(data), root);
      for (std::size_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(data[i], static_cast<float>(i % 1000003) + static_cast<float>(root)) << "element " << i;
      }
    }
    std::vector<float> sums(kCount / 4, static_cast<float>(pg.rank() + 1));
    pg.allreduce(sums, ReduceOp::kSum);
    for (float v : sums) ASSERT_EQ(v, 6.0f);
  });
  test_support::rethrowFirst(errors);
  const std::string mine = fmt::format("hpu-train-{}-", ::getpid());
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    EXPECT_NE(entry.path().filename().string().rfind(mine, 0), 0u) << "left behind: " << entry.path();
  }
}

// The root of a broadcast returns as soon as it sent, and may leave the job
// before the others read: what it sent through shared memory must still
// reach them.
TEST(Rendezvous, RankThatLeavesRightAfterSendingStillDelivers) {
  const Job job{2};
  auto errors = joinAll(job, noAdjustment, [&](ProcessGroup& pg) {
    std::vector<float> data(1000, pg.rank() == 0 ? 42.0f : 0.0f);
    if (pg.rank() == 1) std::this_thread::sleep_for(300ms);
    pg.broadcast(std::span<float>(data), 0);
    EXPECT_EQ(data, std::vector<float>(1000, 42.0f));
  });
  test_support::rethrowFirst(errors);
}

// A message posted to a lane while the receiver looked elsewhere must not be
// taken for one on the socket: the receiver would poll the socket for a
// whole 100 ms slice. Thousands of small allreduces show it if it happens.
TEST(Rendezvous, SmallMessagesWithinANodeNeverWaitAPollSlice) {
  const Job job{2};
  std::vector<std::chrono::steady_clock::duration> slowest(2);
  auto errors = joinAll(job, noAdjustment, [&](ProcessGroup& pg) {
    std::vector<float> data(1, 1.0f);
    auto& worst = slowest[static_cast<std::size_t>(pg.rank())];
    for (int i = 0; i < 3000; ++i) {
      const auto start = std::chrono::steady_clock::now();
      pg.allreduce(data, ReduceOp::kMax);
      worst = std::max(worst, std::chrono::steady_clock::now() - start);
    }
  });
  test_support::rethrowFirst(errors);
  for (const auto& worst : slowest) EXPECT_LT(worst, 95ms);
}

TEST(Rendezvous, SingleProcessNeedsNoSockets) {
  JoinOptions options;  // world size 1, no port
  auto group = joinProcessGroup(options);
  std::vector<float> data{1, 2, 3};
  group->allreduce(data, ReduceOp::kSum);
  EXPECT_EQ(data, (std::vector<float>{1, 2, 3}));
  group->store().set("k", "v", std::chrono::steady_clock::now() + 1s);
  EXPECT_EQ(group->store().get("k", std::chrono::steady_clock::now() + 1s), "v");
}

}  // namespace
}  // namespace hpu::comm
