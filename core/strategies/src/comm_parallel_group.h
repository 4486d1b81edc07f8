// A comm::ProcessGroup as the ops' ParallelGroup: the group a model splits
// its layers (tensor parallelism) or its experts (expert parallelism)
// across. bf16 on the wire travels as bf16 bits. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "bf16_wire.h"
#include "hpu/comm/process_group.h"
#include "hpu/core/base/errors.h"
#include "hpu/core/ops/parallel.h"

namespace hpu::core {

class CommParallelGroup final : public ops::ParallelGroup {
 public:
  explicit CommParallelGroup(std::unique_ptr<comm::ProcessGroup> group) : group_(std::move(group)) {}
  int rank() const override { return group_->rank(); }
  int size() const override { return group_->size(); }
  comm::ProcessGroup& comm() { return *group_; }

  void allreduce(float* data, std::size_t count, DType wire, ops::ParallelReduce op) override {
    const comm::AllreduceOptions o{.op = op == ops::ParallelReduce::kMax ? comm::ReduceOp::kMax : comm::ReduceOp::kSum};
    const std::span<float> values(data, count);
    if (wire != DType::kBFloat16) return group_->allreduce(values, o);
    std::vector<std::uint16_t> bits;
    wire::toBits(values, bits);
    group_->allreduce(wire::bitsView(bits, count), o);
    wire::fromBits(bits, values);
  }

  void allgather(const float* in, std::size_t count, DType wire, float* out) override {
    const std::span<const float> mine(in, count);
    const std::span<float> all(out, count * static_cast<std::size_t>(size()));
    if (wire != DType::kBFloat16) return group_->allgather(mine, all);
    std::vector<std::uint16_t> bits_in, bits_out(out != nullptr ? all.size() : 0);
    wire::toBits(mine, bits_in);
    group_->allgather(wire::bitsView(bits_in, count), wire::bitsView(bits_out, all.size()));
    wire::fromBits(bits_out, all);
  }

  void reduceScatter(const float* in, std::size_t count, DType wire, float* out) override {
    const std::span<const float> all(in, count * static_cast<std::size_t>(size()));
    const std::span<float> mine(out, count);
    if (wire != DType::kBFloat16) return group_->reduceScatter(all, mine, comm::ReduceOp::kSum);
    std::vector<std::uint16_t> bits_in, bits_out(out != nullptr ? count : 0);
    wire::toBits(all, bits_in);
    group_->reduceScatter(wire::bitsView(bits_in, all.size()), wire::bitsView(bits_out, count), comm::ReduceOp::kSum);
    wire::fromBits(bits_out, mine);
  }

  void alltoall(const float* in, std::span<const std::int64_t> send_rows, std::int64_t width, DType wire, float* out,
                std::span<const std::int64_t> recv_rows) override {
    std::vector<std::size_t> send(send_rows.size()), recv(recv_rows.size());
    std::size_t send_total = 0, recv_total = 0;
    for (std::size_t d = 0; d < send.size(); ++d) send_total += send[d] = static_cast<std::size_t>(send_rows[d] * width);
    for (std::size_t d = 0; d < recv.size(); ++d) recv_total += recv[d] = static_cast<std::size_t>(recv_rows[d] * width);
    // Null pointers on a shape-only device: the counts still travel.
    const std::span<const float> values(in, send_total);
    const std::span<float> arrived(out, recv_total);
    if (wire != DType::kBFloat16) return group_->alltoall(values, send, arrived, recv);
    std::vector<std::uint16_t> bits_in, bits_out(out != nullptr ? recv_total : 0);
    wire::toBits(values, bits_in);
    group_->alltoall(wire::bitsView(bits_in, send_total), send, wire::bitsView(bits_out, recv_total), recv);
    wire::fromBits(bits_out, arrived);
  }

  std::vector<std::int64_t> alltoallCounts(std::span<const std::int64_t> counts, std::size_t per_rank) override {
    const std::vector<std::size_t> each(static_cast<std::size_t>(size()), per_rank * sizeof(std::int64_t));
    std::vector<std::int64_t> out(counts.size());
    group_->alltoall(std::as_bytes(counts), each, std::as_writable_bytes(std::span<std::int64_t>(out)), each);
    return out;
  }

  ops::ParallelGroup& subgroupOf(int count) override {
    auto& sub = subgroups_[count];
    if (!sub) {
      HPU_CHECK(count > 0 && size() % count == 0, "subgroupOf({}) of a group of {}", count, size());
      std::vector<int> ranks;
      for (int r = rank() / count * count; r < (rank() / count + 1) * count; ++r) ranks.push_back(r);
      sub = std::make_unique<CommParallelGroup>(group_->split(ranks));
    }
    return *sub;
  }

  void observe(const std::shared_ptr<comm::CollectiveObserver>& observer) {
    group_->setObserver(observer);
    for (auto& [count, sub] : subgroups_) sub->observe(observer);
  }

 private:
  std::unique_ptr<comm::ProcessGroup> group_;
  std::map<int, std::unique_ptr<CommParallelGroup>> subgroups_;  // made from group_, destroyed before it
};

}  // namespace hpu::core
