// Where a training run's time goes, op by op. Runs the hpu-train command
// line given (in this process, on this thread) with an observer on the
// device ops, and at each op's end reads the intra-op team's counters
// (threading.h). Prints, per op and per training step:
//   wall       the op's time on the calling thread
//   kernel     time inside kernel tasks, summed over the threads
//   fork/join  the caller's time in parallel calls outside its own tasks
//              (publishing, waking workers, waiting for the last task)
//   idle       threads x wall - kernel - fork/join: thread time the op left
//              unused (host work in the op, serial kernels, imbalance)
//   parallel   the share of the op's kernel calls that ran on the team
// then the same per kernel call site. Steps are counted as optimizer steps.
//
//   HPU_INTRA_OP_THREADS=2 build/bench_op_costs fit -c configs/fashion_mnist_mlp.yaml
//       --trainer.max_epochs=1 --trainer.limit_train_batches=300 ...
// bench/core/op_costs.py runs it for the MLP at batch 64 and 256 on 1 and 2 threads.
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "hpu/cli/app.h"
#include "hpu/core/tensor/op_record.h"
#include "hpu/device/threading.h"

namespace {

using hpu::device::ParallelStats;

struct OpCost {
  std::uint64_t calls = 0, serial = 0, parallel = 0;
  std::int64_t wall_ns = 0, kernel_ns = 0, fork_join_ns = 0;
};

class CostObserver final : public hpu::core::ops::OpObserver {
 public:
  CostObserver() : last_(hpu::device::parallelStats()) {}

  void onOp(const hpu::core::ops::OpEvent& e) override {
    const ParallelStats now = hpu::device::parallelStats();
    OpCost& c = costs_[std::string(e.op) + (e.backward ? " (backward)" : "")];
    c.calls++;
    c.wall_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(e.end - e.begin).count();
    c.kernel_ns += now.task_ns - last_.task_ns;
    c.fork_join_ns += now.fork_join_ns - last_.fork_join_ns;
    c.serial += now.serial_calls - last_.serial_calls;
    c.parallel += now.parallel_calls - last_.parallel_calls;
    last_ = now;
    if (first_ == std::chrono::steady_clock::time_point{}) first_ = e.begin;
    end_ = e.end;
    if ((e.op == "optimizer_step" || e.op == "optimizer_step_host") && !e.backward) steps_++;
  }

  void print(int threads) const {
    const double steps = static_cast<double>(std::max<std::uint64_t>(1, steps_));
    const auto us = [&](double ns) { return ns / steps / 1e3; };
    std::vector<std::pair<std::string, OpCost>> rows(costs_.begin(), costs_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.wall_ns > b.second.wall_ns; });
    OpCost total;
    const ParallelStats totals = hpu::device::parallelStats();
    std::printf("%llu steps, %d intra-op threads, hand-off cost now %.0f ns, %llu of %llu steps run alone\n",
                static_cast<unsigned long long>(steps_), threads, hpu::device::parallelHandoffNs(),
                static_cast<unsigned long long>(totals.steps_alone), static_cast<unsigned long long>(totals.steps));
    std::printf("%-34s %7s %9s %9s %9s %9s %9s\n", "op (per step)", "calls", "wall us", "kernel", "fork/join", "idle",
                "parallel");
    const auto line = [&](const std::string& name, const OpCost& c) {
      const double idle = threads * static_cast<double>(c.wall_ns) - c.kernel_ns - c.fork_join_ns;
      const std::uint64_t kernel_calls = c.serial + c.parallel;
      std::printf("%-34s %7.1f %9.1f %9.1f %9.1f %9.1f %8.0f%%\n", name.c_str(), c.calls / steps, us(c.wall_ns),
                  us(c.kernel_ns), us(c.fork_join_ns), us(std::max(0.0, idle)),
                  kernel_calls == 0 ? 0.0 : 100.0 * c.parallel / kernel_calls);
    };
    for (const auto& [name, c] : rows) {
      line(name, c);
      total.calls += c.calls;
      total.serial += c.serial;
      total.parallel += c.parallel;
      total.wall_ns += c.wall_ns;
      total.kernel_ns += c.kernel_ns;
      total.fork_join_ns += c.fork_join_ns;
    }
    line("all ops", total);
    const double span =
        static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(end_ - first_).count());
    std::printf("%-34s %7s %9.1f   (host work between ops: loop, autograd, data)\n", "outside ops", "",
                us(span - static_cast<double>(total.wall_ns)));
    std::printf("\n%-34s %9s %9s %9s\n", "kernel call site (per step)", "serial", "parallel", "kernel us");
    for (const auto& [name, s] : hpu::device::parallelSiteStats())
      if (s.serial_calls + s.parallel_calls > 0)
        std::printf("%-34s %9.1f %9.1f %9.1f\n", name.c_str(), s.serial_calls / steps, s.parallel_calls / steps,
                    us(static_cast<double>(s.task_ns)));
  }

 private:
  std::map<std::string, OpCost> costs_;
  ParallelStats last_;
  std::uint64_t steps_ = 0;
  std::chrono::steady_clock::time_point first_{}, end_{};
};

}  // namespace

int main(int argc, char** argv, char** envp) {
  CostObserver observer;
  int rc = 0;
  {
    hpu::core::ops::OpObserverScope scope(&observer);
    rc = hpu::cli::runCli(argc, argv, envp);
  }
  observer.print(hpu::device::intraOpThreads());
  return rc;
}
