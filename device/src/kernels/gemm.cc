// gemm and gemmSerial: the kernels of the instruction set this process uses
// (isa/kernels.h, cpu_isa.h).
#include "hpu/device/kernels/gemm.h"

#include <Eigen/Core>

#include "isa/kernels.h"

namespace hpu::device::kernels {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;

}  // namespace

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
          float beta, float* c, GemmOperands operands) {
  isaKernels(cpuIsa(), operands).gemmThreaded(trans_a, trans_b, m, n, k, a, b, beta != 0.0f, c);
}

void gemmSerial(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
                std::int64_t lda, const float* b, std::int64_t ldb, bool accumulate, float* c, std::int64_t ldc,
                GemmOperands operands) {
  isaKernels(cpuIsa(), operands).gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
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
