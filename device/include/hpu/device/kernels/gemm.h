// Matrix products on row-major float32 matrices (fp32 accumulation).
// Thread-safety: reentrant; uses up to intraOpThreads() threads.
#pragma once

#include <cstdint>

namespace hpu::device::kernels {

// What A and B hold: any float32 values, or bfloat16 values (float32 whose
// low 16 bits are zero, as bf16 tensors are stored). Products of bf16 values
// are exact in fp32; with AVX512_BF16 they run two per lane and instruction
// (VDPBF16PS, fp32 accumulation, as the device's matrix engine), elsewhere on
// the fp32 kernel. Results differ between the two in summation rounding only,
// as they do between instruction sets (cpu_isa.h).
enum class GemmOperands { kFloat32, kBFloat16 };

// What a product's result gets before it is stored for good: C = act(C +
// bias), bias [n] added to every row (null: none), then ReLU (x > 0 ? x :
// 0) when relu. The task that finishes a block of C applies it while the
// block is in cache; the same bits as the passes after the product.
// (Dropout's draws cost more per block row than a pass over C: the fused
// linearRelu op drops in place after the product.)
struct GemmEpilogue {
  const float* bias = nullptr;
  bool relu = false;
  bool empty() const { return bias == nullptr && !relu; }
};

// C[m, n] = op(A)[m, k] * op(B)[k, n] + beta * C, where op(A) is A [m, k] or,
// with trans_a, the transpose of A [k, m] (likewise B). Contiguous rows.
// beta is 0 (overwrite; C may hold garbage) or 1 (accumulate). Each element
// of C is summed in the same order whatever the thread count. Then the
// epilogue.
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
          float beta, float* c, GemmOperands operands = GemmOperands::kFloat32, const GemmEpilogue& epilogue = {});

// C (+)= op(A) * op(B) on strided row-major matrices (the rows of A, B and C
// start lda, ldb and ldc floats apart), on the calling thread: for callers
// that run independent products as their own parallel tasks (attention's
// blocks). accumulate selects += over =. Rounding may differ from gemm()'s.
void gemmSerial(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                std::int64_t lda, const float* b, std::int64_t ldb, bool accumulate, float* c, std::int64_t ldc,
                GemmOperands operands = GemmOperands::kFloat32);

// out[c] (+)= sum over rows of x[r, c], in row order; accumulate selects +=
// over =. Column blocks run on the intra-op threads.
void columnSums(const float* x, std::int64_t rows, std::int64_t cols, float* out, bool accumulate);

}  // namespace hpu::device::kernels
