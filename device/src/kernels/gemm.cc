// gemm and gemmSerial: the kernels of the instruction set this process uses
// (isa/kernels.h, cpu_isa.h); their epilogue; column sums.
#include "hpu/device/kernels/gemm.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "hpu/device/threading.h"
#include "isa/kernels.h"

namespace hpu::device::kernels {

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
          float beta, float* c, GemmOperands operands, const GemmEpilogue& epilogue) {
  isaKernels(cpuIsa(), operands).gemmThreaded(trans_a, trans_b, m, n, k, a, b, beta != 0.0f, c, epilogue);
}

void applyEpilogue(const GemmEpilogue& e, float* c, std::int64_t ldc, std::int64_t row0, std::int64_t rows,
                   std::int64_t col0, std::int64_t cols) {
  for (std::int64_t r = row0; r < row0 + rows; ++r) {
    float* __restrict row = c + r * ldc + col0;
    if (e.bias != nullptr) {
      const float* __restrict bias = e.bias + col0;
      for (std::int64_t j = 0; j < cols; ++j) row[j] = row[j] + bias[j];
    }
    if (e.relu)
      for (std::int64_t j = 0; j < cols; ++j) row[j] = row[j] > 0.0f ? row[j] : 0.0f;  // as the relu op
  }
}

void gemmSerial(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                std::int64_t lda, const float* b, std::int64_t ldb, bool accumulate, float* c, std::int64_t ldc,
                GemmOperands operands) {
  isaKernels(cpuIsa(), operands).gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
}

bool pairedDotProductsPayOff() {
  static const bool pays = [] {
    // [96, 512] x [512, 96] of bf16 values (exact in bf16: 1 + i/8), on
    // this thread; the fastest of 7 interleaved rounds of each (a round the
    // host slows only raises its time).
    constexpr std::int64_t n = 96, k = 512;
    std::vector<float> a(n * k), b(k * n), c(n * n);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = b[a.size() - 1 - i] = 1.0f + static_cast<float>(i % 8) / 8;
    const auto seconds = [&](const IsaKernels& kernels) {
      const auto start = std::chrono::steady_clock::now();
      for (int r = 0; r < 4; ++r) kernels.gemm(false, false, n, n, k, a.data(), k, b.data(), n, false, c.data(), n);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    double paired = std::numeric_limits<double>::infinity(), fp32 = paired;
    for (int round = 0; round < 8; ++round) {  // round 0 warms the scratch and caches up
      const double p = seconds(kAvx512Bf16Kernels), f = seconds(kAvx512Kernels);
      if (round > 0) paired = std::min(paired, p), fp32 = std::min(fp32, f);
    }
    return paired * 1.25 <= fp32;
  }();
  return pays;
}

void columnSums(const float* x, std::int64_t rows, std::int64_t cols, float* out, bool accumulate) {
  constexpr std::int64_t kBlock = 64;  // columns summed together, each over the rows in order
  static ParallelSite site("column sums");
  parallelFor(site, cols, kBlock, static_cast<double>(rows * cols), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c0 = begin; c0 < end; c0 += kBlock) {
      const std::int64_t w = std::min(kBlock, end - c0);
      float sums[kBlock] = {};
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* __restrict row = x + r * cols + c0;
        for (std::int64_t j = 0; j < w; ++j) sums[j] += row[j];
      }
      for (std::int64_t j = 0; j < w; ++j) out[c0 + j] = accumulate ? out[c0 + j] + sums[j] : sums[j];
    }
  });
}

}  // namespace hpu::device::kernels
