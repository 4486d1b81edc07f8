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

// C[m, n] = op(A)[m, k] * op(B)[k, n] + beta * C, where op(A) is A [m, k] or,
// with trans_a, the transpose of A [k, m] (likewise B). Contiguous rows.
// beta is 0 (overwrite; C may hold garbage) or 1 (accumulate). Each element
// of C is summed in the same order whatever the thread count.
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
          float beta, float* c, GemmOperands operands = GemmOperands::kFloat32);

// C (+)= op(A) * op(B) on strided row-major matrices (the rows of A, B and C
// start lda, ldb and ldc floats apart), on the calling thread: for callers
// that run independent products as their own parallel tasks (attention's
// blocks). accumulate selects += over =. Rounding may differ from gemm()'s.
void gemmSerial(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                std::int64_t lda, const float* b, std::int64_t ldb, bool accumulate, float* c, std::int64_t ldc,
                GemmOperands operands = GemmOperands::kFloat32);

// y[r, :] += bias for every row r of y [rows, cols].
void addRowBias(float* y, const float* bias, std::int64_t rows, std::int64_t cols);
// out[c] (+)= sum over rows of x[r, c]; accumulate selects += over =.
void columnSums(const float* x, std::int64_t rows, std::int64_t cols, float* out, bool accumulate);

}  // namespace hpu::device::kernels
