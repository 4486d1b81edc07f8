// Kernel micro-benchmarks: hpu-train's GEMM against a bare Eigen product on
// the same maps (the ceiling the kernel wraps), and the Fashion-MNIST CNN's
// convolutions forward + backward. bench/device/kernels_vs.py runs this
// interleaved and compares with PyTorch.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <random>
#include <vector>

#include "hpu/device/kernels/conv.h"
#include "hpu/device/kernels/gemm.h"
#include "hpu/device/numerics.h"
#include "hpu/device/threading.h"

namespace {

using namespace hpu::device::kernels;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

std::vector<float> randomVector(std::size_t n) {
  std::mt19937 g(42);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// (trans_a, trans_b, m, n, k): the three products of a Linear layer's step,
// for the MLP's first layer and the small Llama's MLP (2048 tokens, hidden
// 256, intermediate 688).
void gemmArgs(benchmark::internal::Benchmark* b) {
  for (int batch : {64, 256}) {
    b->Args({0, 1, batch, 256, 784});  // forward  Y = X W^T
    b->Args({1, 0, 256, 784, batch});  // weight   dW = dY^T X
    b->Args({0, 0, batch, 784, 256});  // input    dX = dY W
  }
  b->Args({0, 1, 2048, 688, 256});
  b->Args({1, 0, 688, 256, 2048});
  b->Args({0, 0, 2048, 256, 688});
}

// Normal samples rounded to bfloat16 (a bf16 tensor's values).
std::vector<float> bf16Vector(std::size_t n) {
  std::vector<float> v = randomVector(n);
  hpu::device::roundInPlace(v, hpu::device::DType::kBFloat16);
  return v;
}

void runGemm(benchmark::State& state, GemmOperands operands) {
  const bool ta = state.range(0), tb = state.range(1);
  const auto m = state.range(2), n = state.range(3), k = state.range(4);
  auto a = bf16Vector(static_cast<std::size_t>(m * k)), b = bf16Vector(static_cast<std::size_t>(k * n));
  std::vector<float> c(static_cast<std::size_t>(m * n));
  for (auto _ : state) {
    gemm(ta, tb, m, n, k, a.data(), b.data(), 0.0f, c.data(), operands);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate,
                                                  benchmark::Counter::kIs1000);
}
void BM_GemmOurs(benchmark::State& state) { runGemm(state, GemmOperands::kFloat32); }
void BM_GemmOursBf16(benchmark::State& state) { runGemm(state, GemmOperands::kBFloat16); }

void BM_GemmEigen(benchmark::State& state) {
  const bool ta = state.range(0), tb = state.range(1);
  const auto m = state.range(2), n = state.range(3), k = state.range(4);
  auto a = randomVector(static_cast<std::size_t>(m * k)), b = randomVector(static_cast<std::size_t>(k * n));
  std::vector<float> c(static_cast<std::size_t>(m * n));
  Eigen::Map<RowMajor> C(c.data(), m, n);
  Eigen::Map<const RowMajor> A(a.data(), ta ? k : m, ta ? m : k), B(b.data(), tb ? n : k, tb ? k : n);
  for (auto _ : state) {
    if (ta)
      C.noalias() = A.transpose() * B;
    else if (tb)
      C.noalias() = A * B.transpose();
    else
      C.noalias() = A * B;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate,
                                                  benchmark::Counter::kIs1000);
}

BENCHMARK(BM_GemmOurs)->Apply(gemmArgs)->UseRealTime();
BENCHMARK(BM_GemmOursBf16)->Apply(gemmArgs)->UseRealTime();
BENCHMARK(BM_GemmEigen)->Apply(gemmArgs)->UseRealTime();

// The CNN's two convolutions at batch 64: forward, then all three gradients.
void BM_ConvForwardBackward(benchmark::State& state) {
  const Conv2dShape g = state.range(0) == 1 ? Conv2dShape{64, 1, 28, 28, 32, 3, 3, 1, 1}
                                            : Conv2dShape{64, 32, 14, 14, 64, 3, 3, 1, 1};
  const std::size_t in = static_cast<std::size_t>(g.n * g.c * g.h * g.w);
  const std::size_t out = static_cast<std::size_t>(g.n * g.k * g.outH() * g.outW());
  auto x = randomVector(in), w = randomVector(static_cast<std::size_t>(g.k * g.c * g.r * g.s)), dy = randomVector(out);
  std::vector<float> b(static_cast<std::size_t>(g.k)), y(out), dx(in), dw(w.size()), db(b.size());
  const bool need_dx = state.range(0) != 1;  // the first layer's input needs no gradient
  for (auto _ : state) {
    conv2dForward(g, x.data(), w.data(), b.data(), y.data());
    conv2dBackward(g, x.data(), w.data(), dy.data(), need_dx ? dx.data() : nullptr, false, dw.data(), false, db.data(),
                   false);
    benchmark::DoNotOptimize(dw.data());
  }
}
BENCHMARK(BM_ConvForwardBackward)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  if (const char* t = std::getenv("HPU_INTRA_OP_THREADS")) hpu::device::setIntraOpThreads(std::atoi(t));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
