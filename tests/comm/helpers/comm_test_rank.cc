// One rank of a multi-process comm test, configured like a real job: the
// cluster variables and HPU_* settings come from the environment, the
// trainer's topology from argv.
//
//   comm_test_rank <scenario> <devices> <num_nodes> [mode]
//
// Scenarios: collectives, alltoall, subgroups, allreduce-loop, alltoall-loop,
// mismatch, launch <mode>.
// Errors print "<ErrorType>: <message>" on stderr and exit with a code per
// type: EnvError 2, PeerLostError 3, RendezvousError 4,
// CollectiveMismatchError 5, CommTimeoutError 6, LaunchError 7, other 1.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <spdlog/fmt/fmt.h>

#include "../reference.h"
#include "hpu/comm/cluster_environment.h"
#include "hpu/comm/comm_settings.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/fault_injection.h"
#include "hpu/comm/launcher.h"
#include "hpu/comm/rendezvous.h"

namespace {

using namespace hpu::comm;
using hpu::Environment;
using namespace std::chrono_literals;
using hpu::comm::test_support::AlltoallCase;
using hpu::comm::test_support::referenceValue;
using hpu::comm::test_support::TypedBuffer;
using hpu::comm::test_support::unevenCount;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "CheckFailed: %s\n", what.c_str());
  std::exit(1);
}

// A variable of this helper's own (HPU_TEST_*), which the product's catalogue
// does not list.
std::optional<std::string> testVariable(const Environment& env, const std::string& name) {
  const auto it = env.variables().find(name);
  if (it == env.variables().end()) return std::nullopt;
  return it->second;
}

std::unique_ptr<ProcessGroup> join(const Environment& env, const Topology& topology) {
  JoinOptions options;
  options.cluster = resolveClusterInfo(env, topology);
  options.settings = commSettingsFromEnv(env);
  options.token = JobToken::fromEnv(env);
  options.version = testVariable(env, "HPU_TEST_VERSION").value_or("1.0.0");
  options.config.entries = {{"trainer.precision", testVariable(env, "HPU_TEST_PRECISION").value_or("32-true")}};
  options.progressInterval = 500ms;
  return joinProcessGroup(options);
}

// Alltoalls of every dtype with uneven blocks (0 to 4097 elements), then
// large ones (up to 1 MiB per pair: several chunks), the counts learned
// first by alltoallCounts.
void checkAlltoall(ProcessGroup& pg) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kByte}) {
    for (int salt = 0; salt < 4; ++salt) {
      AlltoallCase mine(dtype, pg.rank(), pg.size(), [salt](int src, int dst) { return unevenCount(src, dst, salt); });
      pg.alltoall(mine.in(), mine.sendCounts, mine.out(), mine.recvCounts);
      if (const std::string wrong = mine.mismatch(); !wrong.empty()) {
        fail(fmt::format("alltoall {}: {}", dtypeName(dtype), wrong));
      }
    }
  }
  AlltoallCase large(DType::kFloat32, pg.rank(), pg.size(), [](int src, int dst) {
    return static_cast<std::size_t>((src + 2 * dst) % 3) * 131072 + 5;
  });
  if (pg.alltoallCounts(large.sendCounts) != large.recvCounts) fail("alltoallCounts");
  pg.alltoall(large.in(), large.sendCounts, large.out(), large.recvCounts);
  if (const std::string wrong = large.mismatch(); !wrong.empty()) fail("large alltoall: " + wrong);
}

void checkCollectives(ProcessGroup& pg) {
  const int n = pg.size();
  for (std::size_t count : {0ul, 1ul, 7ul, 4097ul, 262147ul}) {
    for (Algorithm algorithm :
         {Algorithm::kRing, Algorithm::kRecursiveDoubling, Algorithm::kHalvingDoubling, Algorithm::kHierarchical}) {
      for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax}) {
          TypedBuffer buffer(dtype, count, pg.rank());
          pg.allreduce(buffer.view(), AllreduceOptions{.op = op, .algorithm = algorithm});
          for (std::size_t i = 0; i < count; ++i) {
            if (buffer.at(i) != referenceValue(op, dtype, n, i)) {
              fail(fmt::format("allreduce {} {} count {} element {}: {} vs {}", reduceOpName(op), dtypeName(dtype),
                               count, i, buffer.at(i), referenceValue(op, dtype, n, i)));
            }
          }
        }
      }
    }
    for (int root : {0, n - 1}) {
      TypedBuffer buffer(DType::kFloat32, count, pg.rank());
      pg.broadcast(buffer.view(), root);
      if (buffer.bytes() != TypedBuffer(DType::kFloat32, count, root).bytes()) fail("broadcast differs from the root");
    }
    std::vector<float> gathered(count);
    const auto shard = ProcessGroup::shardRange(count, n, pg.rank());
    std::vector<float> mine(shard.size);
    for (std::size_t j = 0; j < shard.size; ++j) mine[j] = float(shard.offset + j);
    pg.allgather(std::span<const float>(mine), std::span<float>(gathered));
    for (std::size_t i = 0; i < count; ++i) {
      if (gathered[i] != float(i)) fail(fmt::format("allgather element {}", i));
    }
    TypedBuffer input(DType::kFloat32, count, pg.rank());
    TypedBuffer output(DType::kFloat32, shard.size, pg.rank());
    pg.reduceScatter(input.view(), output.view(), ReduceOp::kSum);
    for (std::size_t j = 0; j < shard.size; ++j) {
      if (output.at(j) != referenceValue(ReduceOp::kSum, DType::kFloat32, n, shard.offset + j)) {
        fail(fmt::format("reduce_scatter element {}", j));
      }
    }
  }
  checkAlltoall(pg);
  pg.barrier("collectives_done");
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  pg.store().add("finished", 1, deadline);
  pg.barrier("counted");
  if (pg.store().add("finished", 0, deadline) != n) fail("store counter");
  std::printf("rank %d: collectives ok\n", pg.rank());
}

// Fails unless `buffer` holds op over the inputs of `ranks` (reference.h).
void expectReference(const TypedBuffer& buffer, ReduceOp op, const std::vector<int>& ranks, const std::string& what) {
  for (std::size_t i = 0; i < buffer.size(); ++i) {
    const float expected = referenceValue(op, buffer.dtype, ranks, i);
    if (buffer.at(i) != expected) fail(fmt::format("{} element {}: {} vs {}", what, i, buffer.at(i), expected));
  }
}

// TP x DP = 2 x 2 on two nodes of two ranks: the ranks of a node form a
// tensor-parallel group, the ranks of one local index a data-parallel one.
// Asynchronous DP, synchronous TP and job-wide allreduces interleave, in
// the same order on every rank.
void subgroups(ProcessGroup& pg) {
  if (pg.size() != 4) fail("the subgroups scenario needs 4 ranks");
  const int r = pg.rank();
  const std::vector<int> tpRanks{r / 2 * 2, r / 2 * 2 + 1};
  const std::vector<int> dpRanks{r % 2, r % 2 + 2};
  const std::vector<int> allRanks{0, 1, 2, 3};
  auto tp = pg.split(tpRanks);
  auto dp = pg.split(dpRanks);
  for (std::size_t count : {1ul, 4097ul, 262147ul}) {
    TypedBuffer dpData(DType::kBFloat16, count, r);
    TypedBuffer tpData(DType::kFloat32, count, r);
    TypedBuffer worldData(DType::kFloat32, count, r);
    const Work dpWork = dp->allreduceAsync(dpData.view(), AllreduceOptions{.op = ReduceOp::kSum});
    tp->allreduce(tpData.view(), AllreduceOptions{.op = ReduceOp::kMax});
    pg.allreduce(worldData.view(), AllreduceOptions{.op = ReduceOp::kAvg});
    dpWork.wait(60s);
    expectReference(dpData, ReduceOp::kSum, dpRanks, fmt::format("DP allreduce of {}", count));
    expectReference(tpData, ReduceOp::kMax, tpRanks, fmt::format("TP allreduce of {}", count));
    expectReference(worldData, ReduceOp::kAvg, allRanks, fmt::format("job-wide allreduce of {}", count));
  }
  tp->barrier("tp_done");
  dp->barrier("dp_done");
  pg.barrier("subgroups_done");
  std::printf("rank %d: subgroups ok\n", r);
}

void allreduceLoop(ProcessGroup& pg) {
  std::vector<float> data(1 << 20, 1.0f);
  pg.allreduce(data, ReduceOp::kSum);
  std::printf("rank %d: looping\n", pg.rank());
  std::fflush(stdout);
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < end) pg.allreduce(data, ReduceOp::kAvg);
  fail("the loop ended without losing a peer");
}

void alltoallLoop(ProcessGroup& pg) {
  const auto n = static_cast<std::size_t>(pg.size());
  const std::vector<std::size_t> counts(n, (1u << 20) / n);
  std::vector<float> input(counts[0] * n, 1.0f), output(input.size());
  const auto once = [&] { pg.alltoall(std::span<const float>(input), counts, std::span<float>(output), counts); };
  once();
  std::printf("rank %d: looping\n", pg.rank());
  std::fflush(stdout);
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < end) once();
  fail("the loop ended without losing a peer");
}

void mismatch(ProcessGroup& pg) {
  std::vector<float> data(pg.rank() == 1 ? 11 : 10, 1.0f);
  pg.allreduce(data, ReduceOp::kSum);
  fail("mismatched allreduce completed");
}

// The process the user started (local rank 0) and the workers it spawns.
int launch(const Environment& processEnv, const Topology& topology, const std::string& mode) {
  const ClusterInfo cluster = resolveClusterInfo(processEnv, topology);
  std::unique_ptr<LocalLauncher> launcher;
  Environment env = processEnv;
  if (!cluster.createsProcessesExternally && cluster.localWorldSize > 1) {
    launcher = launchLocalWorkers(LaunchOptions{.cluster = cluster, .env = processEnv,
                                                .terminationGrace = 2s, .exitGrace = 20s});
    env = launcher->sharedEnv();
    if (auto pidFile = testVariable(processEnv, "HPU_TEST_PID_FILE")) {
      std::ofstream out(*pidFile);
      for (pid_t pid : launcher->workerPids()) out << pid << "\n";
    }
  }
  const int localRank = resolveClusterInfo(env, topology).localRank;
  if (mode == "join") {
    auto pg = join(env, topology);
    std::vector<float> data(1000, 1.0f);
    pg->allreduce(data, ReduceOp::kSum);
    if (data[0] != float(pg->size())) fail("allreduce across launched ranks");
    pg->barrier("launched");
  } else if (mode == "worker-fails") {
    if (localRank == 2) {
      std::this_thread::sleep_for(300ms);
      return 7;
    }
    if (localRank != 0) {
      std::this_thread::sleep_for(60s);
      fail("a worker outlived the failure of local rank 2");
    }
  } else if (mode == "wait-for-signal") {
    if (localRank != 0) {
      static std::string markerPath;
      markerPath = fmt::format("{}.rank{}", testVariable(env, "HPU_TEST_PID_FILE").value(), localRank);
      signal(SIGTERM, [](int) {
        const int fd = ::open(markerPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        [[maybe_unused]] auto written = ::write(fd, "got SIGTERM\n", 12);
        ::close(fd);
        std::_Exit(0);
      });
    }
    std::printf("local rank %d: waiting\n", localRank);
    std::fflush(stdout);
    std::this_thread::sleep_for(60s);
    fail("no signal arrived");
  } else if (mode == "rank0-fails") {
    if (localRank == 0) throw std::runtime_error("rank 0 failed on purpose");
    std::this_thread::sleep_for(60s);
    fail("a worker outlived rank 0");
  } else {
    fail("unknown launch mode " + mode);
  }
  return launcher ? launcher->waitWorkers(std::chrono::steady_clock::now() + 60s) : 0;
}

}  // namespace

int main(int argc, char** argv, char** envp) {
  using hpu::Environment;
  if (argc < 4) {
    std::fprintf(stderr, "usage: comm_test_rank <scenario> <devices> <num_nodes> [mode]\n");
    return 64;
  }
  const std::string scenario = argv[1];
  const Topology topology{std::atoi(argv[2]), std::atoi(argv[3])};
  const Environment env = Environment::fromEntries(envp);
  try {
    installFaultPlan(env);
    if (scenario == "launch") return launch(env, topology, argc > 4 ? argv[4] : "");
    auto pg = join(env, topology);
    if (scenario == "collectives") {
      checkCollectives(*pg);
    } else if (scenario == "subgroups") {
      subgroups(*pg);
    } else if (scenario == "alltoall") {
      checkAlltoall(*pg);
      pg->barrier("alltoall_done");
      std::printf("rank %d: alltoall ok\n", pg->rank());
    } else if (scenario == "allreduce-loop") {
      allreduceLoop(*pg);
    } else if (scenario == "alltoall-loop") {
      alltoallLoop(*pg);
    } else if (scenario == "mismatch") {
      mismatch(*pg);
    } else {
      fail("unknown scenario " + scenario);
    }
    return 0;
  } catch (const PeerLostError& e) {
    std::fprintf(stderr, "PeerLostError rank=%d: %s\n", e.rank(), e.what());
    return 3;
  } catch (const EnvError& e) {
    std::fprintf(stderr, "EnvError: %s\n", e.what());
    return 2;
  } catch (const RendezvousError& e) {
    std::fprintf(stderr, "RendezvousError: %s\n", e.what());
    return 4;
  } catch (const CollectiveMismatchError& e) {
    std::fprintf(stderr, "CollectiveMismatchError: %s\n", e.what());
    return 5;
  } catch (const CommTimeoutError& e) {
    std::fprintf(stderr, "CommTimeoutError: %s\n", e.what());
    return 6;
  } catch (const LaunchError& e) {
    std::fprintf(stderr, "LaunchError: %s\n", e.what());
    return 7;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "Error: %s\n", e.what());
    return 1;
  }
}
