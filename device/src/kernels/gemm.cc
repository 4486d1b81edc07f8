// gemm and gemmSerial: the kernels of the instruction set this process uses
// (isa/kernels.h, cpu_isa.h); their epilogue; column sums.
#include "hpu/device/kernels/gemm.h"

#include <algorithm>

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
