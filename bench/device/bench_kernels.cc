// Kernel micro-benchmarks: the machine's fp32 FMA peak (a probe of
// independent FMA chains on every intra-op thread), hpu-train's GEMM (on
// the instruction set HPU_CPU_ISA picks, fp32 and bf16 operands), and the
// Fashion-MNIST CNN's convolutions forward + backward.
// bench/device/kernels_vs.py runs this interleaved and compares with PyTorch.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <random>
#include <thread>
#include <vector>

#include "hpu/device/cpu_isa.h"
#include "hpu/device/kernels/attention.h"
#include "hpu/device/kernels/conv.h"
#include "hpu/device/kernels/gemm.h"
#include "hpu/device/numerics.h"
#include "hpu/device/threading.h"

namespace {

using namespace hpu::device::kernels;

// `iters` rounds of 12 independent FMA chains of full vectors: what one core
// sustains at best (latency 4 cycles x 2-3 FMA units needs 8-12 chains).
// Returns a value that depends on every chain.
__attribute__((target("avx512f"))) float fmaChains512(std::int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (std::int64_t it = 0; it < iters; ++it)
    for (auto& v : acc) v = _mm512_fmadd_ps(v, a, b);
  for (int i = 1; i < 12; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  return _mm512_reduce_add_ps(acc[0]);
}
__attribute__((target("avx2,fma"))) float fmaChains256(std::int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (std::int64_t it = 0; it < iters; ++it)
    for (auto& v : acc) v = _mm256_fmadd_ps(v, a, b);
  float out[8];
  for (int i = 1; i < 12; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  _mm256_storeu_ps(out, acc[0]);
  return out[0];
}

// The probe on every intra-op thread at once; flops counted as 2 per lane
// and FMA. The peak the GEMMs are measured against (kernels_vs.py).
void BM_FmaPeak(benchmark::State& state) {
  const int threads = hpu::device::intraOpThreads();
  const bool avx512 = hpu::device::cpuIsa() >= hpu::device::CpuIsa::kAvx512;
  constexpr std::int64_t kIters = 1 << 22;
  std::vector<float> sink(static_cast<std::size_t>(threads));
  for (auto _ : state) {
    std::vector<std::thread> team;
    for (int t = 0; t < threads; ++t)
      team.emplace_back(
          [&, t] { sink[static_cast<std::size_t>(t)] = avx512 ? fmaChains512(kIters) : fmaChains256(kIters); });
    for (auto& th : team) th.join();
    benchmark::DoNotOptimize(sink.data());
  }
  const double flops = 2.0 * 12 * (avx512 ? 16 : 8) * static_cast<double>(kIters) * threads;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_FmaPeak)->UseRealTime()->Unit(benchmark::kMicrosecond);

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
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
void BM_GemmOurs(benchmark::State& state) { runGemm(state, GemmOperands::kFloat32); }
void BM_GemmOursBf16(benchmark::State& state) { runGemm(state, GemmOperands::kBFloat16); }

BENCHMARK(BM_GemmOurs)->Apply(gemmArgs)->UseRealTime();
BENCHMARK(BM_GemmOursBf16)->Apply(gemmArgs)->UseRealTime();

// The CNN's two convolutions at batch 64: forward, then all three gradients.
void BM_ConvForwardBackward(benchmark::State& state) {
  const Conv2dShape g =
      state.range(0) == 1 ? Conv2dShape{64, 1, 28, 28, 32, 3, 3, 1, 1} : Conv2dShape{64, 32, 14, 14, 64, 3, 3, 1, 1};
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

// The small Llama's causal attention (batch 8, 4 heads, 256 tokens, head
// dim 64): forward (range 0 = 0), or forward then backward (1). GFLOP/s
// counts the causal half's products: 2 in forward, 5 in forward + backward.
void BM_Attention(benchmark::State& state) {
  AttentionShape g;
  g.batch = 8, g.heads = g.kv_heads = 4, g.q_len = g.kv_len = g.kv_rows = 256, g.head_dim = 64;
  g.scale = 0.125f;
  const std::size_t n = static_cast<std::size_t>(g.batch * g.heads * g.q_len * g.head_dim);
  auto q = randomVector(n), k = randomVector(n), v = randomVector(n), dout = randomVector(n);
  std::vector<float> out(n), lse(static_cast<std::size_t>(g.batch * g.heads * g.q_len)), dq(n), dk(n), dv(n);
  const bool backward = state.range(0) == 1;
  for (auto _ : state) {
    attentionForward(g, q.data(), k.data(), v.data(), out.data(), lse.data());
    if (backward)
      attentionBackward(g, q.data(), k.data(), v.data(), out.data(), dout.data(), lse.data(), dq.data(), false,
                        dk.data(), dv.data(), false);
    benchmark::DoNotOptimize(dk.data());
  }
  const double products = backward ? 5.0 : 2.0;
  const double flops = products * 2.0 * static_cast<double>(g.batch * g.heads * g.head_dim) *
                       static_cast<double>(g.q_len * (g.kv_len + 1) / 2);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Attention)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  if (const char* t = std::getenv("HPU_INTRA_OP_THREADS")) hpu::device::setIntraOpThreads(std::atoi(t));
  hpu::device::cpuIsa();  // HPU_CPU_ISA, checked before any benchmark runs
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
