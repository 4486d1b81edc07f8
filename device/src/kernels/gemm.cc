#include "hpu/device/kernels/gemm.h"

#include <Eigen/Core>

namespace hpu::device::kernels {
namespace {
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;
}  // namespace

void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
          const float* b, float beta, float* c) {
  Map C(c, m, n);
  const ConstMap A(a, trans_a ? k : m, trans_a ? m : k);
  const ConstMap B(b, trans_b ? n : k, trans_b ? k : n);
  auto run = [&](const auto& lhs, const auto& rhs) {
    if (beta == 0.0f)
      C.noalias() = lhs * rhs;
    else
      C.noalias() += lhs * rhs;
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
