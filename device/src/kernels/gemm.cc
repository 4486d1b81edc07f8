// gemm and gemmSerial: the packed AVX-512 kernel (packed_gemm.h) where the
// CPU has it (gemm on the intra-op threads), Eigen's product elsewhere.
#include "hpu/device/kernels/gemm.h"

#include <omp.h>

#include <Eigen/Core>

#include "hpu/device/threading.h"
#include "packed_gemm.h"

namespace hpu::device::kernels {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Map<RowMajor, 0, Eigen::OuterStride<>>;
using ConstStrided = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;
using Map = Eigen::Map<RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;

// C (+)= op(A) * op(B) on Eigen maps of A (or A^T) and B (or B^T).
template <class CMap, class AMap, class BMap>
void eigenProduct(bool trans_a, bool trans_b, const AMap& A, const BMap& B, bool accumulate, CMap& C) {
  auto run = [&](const auto& lhs, const auto& rhs) {
    if (accumulate)
      C.noalias() += lhs * rhs;
    else
      C.noalias() = lhs * rhs;
  };
  if (trans_a && trans_b)
    run(A.transpose(), B.transpose());
  else if (trans_a)
    run(A.transpose(), B);
  else if (trans_b)
    run(A, B.transpose());
  else
    run(A, B);
}

#if defined(__AVX512F__)
// C (+)= op(A) op(B) with the packed kernel: on the intra-op threads, or on
// this thread inside a parallel region and for small products.
void packedGemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
                bool accumulate, float* c, GemmOperands operands) {
  const bool bf16 = operands == GemmOperands::kBFloat16;
  if (omp_in_parallel() || intraOpThreads() == 1 || 2 * m * n * k < (std::int64_t{1} << 21)) {
    const packed::DenseSource as{a, ta ? m : k}, bs{b, tb ? k : n};
    if (bf16)
      packed::gemm<packed::Operands::kBFloat16>(ta, tb, m, n, k, as, bs, accumulate, c, n);
    else
      packed::gemm(ta, tb, m, n, k, as, bs, accumulate, c, n);
  } else if (bf16) {
    packed::gemmThreaded<packed::Operands::kBFloat16>(ta, tb, m, n, k, a, b, accumulate, c);
  } else {
    packed::gemmThreaded<packed::Operands::kFloat32>(ta, tb, m, n, k, a, b, accumulate, c);
  }
}
#endif

}  // namespace

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
          float beta, float* c, GemmOperands operands) {
#if defined(__AVX512F__)
  packedGemm(trans_a, trans_b, m, n, k, a, b, beta != 0.0f, c, operands);
#else
  Map C(c, m, n);
  eigenProduct(trans_a, trans_b, ConstMap(a, trans_a ? k : m, trans_a ? m : k),
               ConstMap(b, trans_b ? n : k, trans_b ? k : n), beta != 0.0f, C);
#endif
}

void gemmSerial(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                std::int64_t lda, const float* b, std::int64_t ldb, bool accumulate, float* c, std::int64_t ldc,
                GemmOperands operands) {
#if defined(__AVX512F__)
  const packed::DenseSource as{a, lda}, bs{b, ldb};
  if (operands == GemmOperands::kBFloat16)
    packed::gemm<packed::Operands::kBFloat16>(trans_a, trans_b, m, n, k, as, bs, accumulate, c, ldc);
  else
    packed::gemm(trans_a, trans_b, m, n, k, as, bs, accumulate, c, ldc);
#else
  if (m == 0 || n == 0) return;
  Strided C(c, m, n, Eigen::OuterStride<>(ldc));
  eigenProduct(trans_a, trans_b, ConstStrided(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda)),
               ConstStrided(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb)), accumulate, C);
#endif
}

void addRowBias(float* y, const float* bias, std::int64_t rows, std::int64_t cols) {
  Map(y, rows, cols).rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias, cols);
}

void columnSums(const float* x, std::int64_t rows, std::int64_t cols, float* out, bool accumulate) {
  Eigen::Map<Eigen::RowVectorXf> o(out, cols);
  if (accumulate)
    o += ConstMap(x, rows, cols).colwise().sum();
  else
    o = ConstMap(x, rows, cols).colwise().sum();
}

}  // namespace hpu::device::kernels
