#include "mpi_collectives.h"

#include <mpi.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <span>
#include <thread>
#include <string>
#include <vector>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "../collectives/reduce_kernels.h"
#include "hpu/comm/errors.h"
#include "hpu/comm/process_group.h"

namespace hpu::comm::detail {
namespace {

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw CommError(fmt::format("{} failed: {}", what, std::string(text, static_cast<std::size_t>(length))));
}

// out = in op inout, with this library's kernels.
template <DType D, ReduceOp O>
void reduce(void* in, void* inout, int* length, MPI_Datatype*) {
  combine(D, O, static_cast<const std::byte*>(in), static_cast<const std::byte*>(inout), static_cast<std::byte*>(inout),
          static_cast<std::size_t>(*length));
}

// While a blocking MPI collective runs on the caller's thread, checks every
// 50 ms that every rank is alive, this one has not aborted and the deadline
// has not passed (ctx.checkAlive()). A blocking MPI call cannot be
// interrupted, so when one of those fails it logs why, naming the rank and
// the collective, and ends this process with exit code 1; mpirun then stops
// the other ranks, as it does when any rank dies.
class Watchdog {
 public:
  Watchdog() : thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  // Watches `ctx` until the returned guard is destroyed.
  auto guard(CollectiveContext& ctx) {
    {
      std::lock_guard lock(mutex_);
      watched_ = &ctx;
    }
    struct Guard {
      Watchdog* w;
      ~Guard() {
        std::lock_guard lock(w->mutex_);
        w->watched_ = nullptr;
      }
    };
    return Guard{this};
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(50));
      if (watched_ == nullptr) continue;
      try {
        watched_->checkAlive();
      } catch (const std::exception& e) {
        spdlog::error("{} (the collective runs on Open MPI, which cannot be interrupted: this rank exits, and mpirun "
                      "stops the others)",
                      e.what());
        spdlog::default_logger()->flush();
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(1);
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  CollectiveContext* watched_ = nullptr;
  bool stopping_ = false;
  std::thread thread_;
};

class MpiCollectives final : public NativeCollectives {
 public:
  MpiCollectives(MPI_Comm comm, int size) : comm_(comm), size_(size) {
    check(MPI_Type_contiguous(2, MPI_BYTE, &bf16_), "MPI_Type_contiguous");
    check(MPI_Type_commit(&bf16_), "MPI_Type_commit");
    addOp<DType::kFloat32, ReduceOp::kSum>();
    addOp<DType::kFloat32, ReduceOp::kMin>();
    addOp<DType::kFloat32, ReduceOp::kMax>();
    addOp<DType::kBFloat16, ReduceOp::kSum>();
    addOp<DType::kBFloat16, ReduceOp::kMin>();
    addOp<DType::kBFloat16, ReduceOp::kMax>();
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(version, &length);
    name_ = std::string(version, static_cast<std::size_t>(length));
    name_ = name_.substr(0, name_.find_first_of(",\n"));  // "Open MPI v4.1.4"
  }

  ~MpiCollectives() override {
    if (abandoned_) return;  // a failed job: MPI_Finalize would wait for ranks that are gone
    for (MPI_Op& op : ops_) MPI_Op_free(&op);
    MPI_Type_free(&bf16_);
    MPI_Comm_free(&comm_);
    MPI_Finalize();
  }

  std::string name() const override { return name_; }
  void abandon() override { abandoned_ = true; }

  void allreduce(CollectiveContext& ctx, BufferView data, ReduceOp op) override {
    const auto watching = watchdog_.guard(ctx);
    check(MPI_Allreduce(MPI_IN_PLACE, data.data, count(data.count), type(data.dtype), mpiOp(data.dtype, op), comm_),
          "MPI_Allreduce");
    if (op == ReduceOp::kAvg) divide(data.dtype, data.data, data.count, size_);
  }

  void broadcast(CollectiveContext& ctx, BufferView data, int root) override {
    const auto watching = watchdog_.guard(ctx);
    check(MPI_Bcast(data.data, count(data.bytes()), MPI_BYTE, root, comm_), "MPI_Bcast");
  }

  void allgather(CollectiveContext& ctx, ConstBufferView input, BufferView output) override {
    const auto [counts, displacements] = blocks(output.count, elementSize(output.dtype));
    const auto watching = watchdog_.guard(ctx);
    check(MPI_Allgatherv(input.data, count(input.bytes()), MPI_BYTE, output.data, counts.data(), displacements.data(),
                         MPI_BYTE, comm_),
          "MPI_Allgatherv");
  }

  void reduceScatter(CollectiveContext& ctx, ConstBufferView input, BufferView output, ReduceOp op) override {
    const auto [counts, displacements] = blocks(input.count, 1);
    const auto watching = watchdog_.guard(ctx);
    check(MPI_Reduce_scatter(input.data, output.data, counts.data(), type(input.dtype), mpiOp(input.dtype, op), comm_),
          "MPI_Reduce_scatter");
    if (op == ReduceOp::kAvg) divide(output.dtype, output.data, output.count, size_);
  }

  void alltoall(CollectiveContext& ctx, ConstBufferView input, std::span<const Range> sendBlocks, BufferView output,
                std::span<const Range> recvBlocks) override {
    const auto [sendCounts, sendDisplacements] = byteBlocks(sendBlocks, elementSize(input.dtype));
    const auto [recvCounts, recvDisplacements] = byteBlocks(recvBlocks, elementSize(output.dtype));
    const auto watching = watchdog_.guard(ctx);
    check(MPI_Alltoallv(input.data, sendCounts.data(), sendDisplacements.data(), MPI_BYTE, output.data,
                        recvCounts.data(), recvDisplacements.data(), MPI_BYTE, comm_),
          "MPI_Alltoallv");
  }

  void barrier(CollectiveContext& ctx) override {
    const auto watching = watchdog_.guard(ctx);
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }

 private:
  template <DType D, ReduceOp O>
  void addOp() {
    MPI_Op op;
    check(MPI_Op_create(&reduce<D, O>, /*commute=*/1, &op), "MPI_Op_create");
    ops_.push_back(op);
  }
  MPI_Op mpiOp(DType dtype, ReduceOp op) const {
    // A float32 sum is IEEE addition either way; MPI's own runs its
    // vectorised kernels.
    if (dtype == DType::kFloat32 && (op == ReduceOp::kSum || op == ReduceOp::kAvg)) return MPI_SUM;
    const std::size_t base = dtype == DType::kBFloat16 ? 3 : 0;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: return ops_[base];
      case ReduceOp::kMin: return ops_[base + 1];
      case ReduceOp::kMax: return ops_[base + 2];
    }
    return ops_[base];
  }
  MPI_Datatype type(DType dtype) const { return dtype == DType::kBFloat16 ? bf16_ : MPI_FLOAT; }

  static int count(std::size_t n) {
    if (n > static_cast<std::size_t>(INT32_MAX))
      throw CommError(fmt::format("a collective of {} elements is more than MPI's int counts hold; split the buffer", n));
    return static_cast<int>(n);
  }
  // Every rank's block of `total` elements (ProcessGroup::shardRange), in
  // units of `unit` bytes.
  std::pair<std::vector<int>, std::vector<int>> blocks(std::size_t total, std::size_t unit) const {
    std::vector<Range> ranges;
    for (int r = 0; r < size_; ++r) ranges.push_back(ProcessGroup::shardRange(total, size_, r));
    return byteBlocks(ranges, unit);
  }
  // The counts and displacements of `ranges` in units of `unit` bytes.
  static std::pair<std::vector<int>, std::vector<int>> byteBlocks(std::span<const Range> ranges, std::size_t unit) {
    std::vector<int> counts, displacements;
    for (const Range& range : ranges) {
      counts.push_back(count(range.size * unit));
      displacements.push_back(count(range.offset * unit));
    }
    return {counts, displacements};
  }

  MPI_Comm comm_;
  const int size_;
  MPI_Datatype bf16_;
  std::vector<MPI_Op> ops_;  // float32 sum, min, max, then bfloat16's
  std::string name_;
  bool abandoned_ = false;
  Watchdog watchdog_;
};

}  // namespace

std::unique_ptr<NativeCollectives> makeMpiCollectives(int rank, int size) {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = 0;
    if (!initialized) check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  });
  MPI_Comm comm;
  check(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int mpiRank = 0, mpiSize = 0;
  MPI_Comm_rank(comm, &mpiRank);
  MPI_Comm_size(comm, &mpiSize);
  if (mpiRank != rank || mpiSize != size) {
    MPI_Comm_free(&comm);
    throw EnvError(fmt::format("HPU_COLLECTIVES=mpi: MPI's world has {} process{} with this one rank {}, but the job "
                               "has {} ranks with this one rank {}; start every rank with mpirun -np {} (or srun "
                               "--mpi=pmix), or use HPU_COLLECTIVES=zmq",
                               mpiSize, mpiSize == 1 ? "" : "es", mpiRank, size, rank, size));
  }
  return std::make_unique<MpiCollectives>(comm, size);
}

}  // namespace hpu::comm::detail
