// Shapes and layouts: views with another shape (no data moves, nothing recorded
// on the device), and permutations (a contiguous copy; splitting and merging
// heads is one, its reshape folded in).
#include <numeric>
#include <vector>

#include "hpu/core/ops/ops.h"
#include "hpu/device/kernels/layout.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;

Tensor reshape(const Tensor& x, const Shape& shape) {
  require(shape.numel() == x.numel(), "reshape", [&] { return fmt::format("{} to {}", x.shape().str(), shape.str()); });
  Tensor y = x.reshaped(shape);
  recordUnrecordedBackward("reshape", y, {&x}, [x = GradRef(x), y = GradRef(y)] {
    if (Tensor gy = y.grad(); gy.defined()) accumulateGrad(x, gy.data());
  });
  return y;
}

Tensor flatten(const Tensor& x, int start_dim) {
  std::vector<std::int64_t> dims;
  for (int i = 0; i < start_dim; ++i) dims.push_back(x.size(i));
  dims.push_back(x.shape().tail(start_dim));
  return reshape(x, Shape(std::span<const std::int64_t>(dims)));
}

namespace {

// x's data read as a tensor of shape `as` (x.numel() elements), its
// dimensions reordered by perm (valid, non-negative), as one recorded op with
// the result's data shaped `out` (the reordered shape when empty): a reshape
// before or after costs no copy of the gradient.
Tensor permuteAs(const Tensor& x_in, const Shape& as, const std::vector<int>& perm, const Shape& out = {}) {
  const Tensor x = castTo(x_in, computeDtype(op::kPermute, {&x_in}));
  const OpRecord op_record = record(op::kPermute, {&x});
  std::vector<std::int64_t> dims(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) dims[i] = as[perm[i]];
  const Shape permuted{std::span<const std::int64_t>(dims)};
  Tensor y = like(x, out.ndim() > 0 ? out : permuted);
  if (computes(y)) device::kernels::permute(x.data(), as.dims(), perm, y.data());
  recordBackward(y, {&x}, [x = GradRef(x), y = GradRef(y), perm, permuted] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    std::vector<int> inverse(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) inverse[static_cast<std::size_t>(perm[i])] = static_cast<int>(i);
    GradTarget g = gradTarget(x);
    if (g.data != nullptr) device::kernels::permute(gy.data(), permuted.dims(), inverse, g.data, g.accumulate);
    gradWritten(x);
  });
  return finish(y);
}

}  // namespace

Tensor permute(const Tensor& x, std::span<const int> perm_in) {
  const int n = x.ndim();
  std::vector<int> perm(perm_in.begin(), perm_in.end());
  std::vector<bool> seen(static_cast<std::size_t>(n), false);
  bool valid = static_cast<int>(perm.size()) == n;
  for (int& p : perm) {
    if (p < 0) p += n;
    valid = valid && p >= 0 && p < n && !seen[static_cast<std::size_t>(p)];
    if (valid) seen[static_cast<std::size_t>(p)] = true;
  }
  require(valid, op::kPermute, [&] {
    return fmt::format("[{}] is not a permutation of the {} dimensions of {}", fmt::join(perm_in, ", "), n,
                       x.shape().str());
  });
  return permuteAs(x, x.shape(), perm);
}

Tensor permute(const Tensor& x, std::initializer_list<int> perm) {
  return permute(x, std::span<const int>(perm.begin(), perm.size()));
}

Tensor transpose(const Tensor& x, int d0, int d1) {
  std::vector<int> perm(static_cast<std::size_t>(x.ndim()));
  std::iota(perm.begin(), perm.end(), 0);
  const int n = x.ndim();
  require(d0 >= -n && d0 < n && d1 >= -n && d1 < n, "transpose",
          [&] { return fmt::format("dimensions {} and {} of {}", d0, d1, x.shape().str()); });
  std::swap(perm[static_cast<std::size_t>(d0 < 0 ? d0 + n : d0)], perm[static_cast<std::size_t>(d1 < 0 ? d1 + n : d1)]);
  return permute(x, perm);
}

std::vector<Tensor> split(const Tensor& x_in, std::span<const std::int64_t> sizes) {
  std::int64_t total = 0;
  for (std::int64_t s : sizes) total += s;
  require(x_in.ndim() >= 1 && total == x_in.size(-1), op::kSplit, [&] {
    return fmt::format("pieces [{}] do not add up to the last dimension of {}", fmt::join(sizes, ", "), x_in.shape().str());
  });
  const Tensor x = castTo(x_in, computeDtype(op::kSplit, {&x_in}));
  const OpRecord op_record = record(op::kSplit, {&x});
  const std::int64_t d = x.size(-1), rows = x.numel() / d;
  std::vector<Tensor> pieces;
  std::int64_t at = 0;
  for (std::int64_t size : sizes) {
    Shape shape = x.shape();
    shape[-1] = size;
    Tensor y = like(x, shape);
    if (computes(y))
      for (std::int64_t r = 0; r < rows; ++r) std::copy_n(x.data() + r * d + at, size, y.data() + r * size);
    recordBackward(y, {&x}, [x = GradRef(x), y = GradRef(y), at, size, d, rows] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      // Each piece writes its own columns of x's gradient: the first piece
      // back-propagated claims it (zeroing the rest), the others add.
      GradTarget g = gradTarget(x);
      if (g.data != nullptr) {
        if (!g.accumulate) std::fill(g.data, g.data + x.numel(), 0.0f);
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t j = 0; j < size; ++j) g.data[r * d + at + j] += gy.data()[r * size + j];
      }
      gradWritten(x);
    });
    pieces.push_back(finish(y));
    at += size;
  }
  return pieces;
}

Tensor concatRows(std::span<const Tensor> xs_in) {
  require(!xs_in.empty(), op::kConcat, "needs at least one tensor");
  std::vector<const Tensor*> given;
  for (const Tensor& x : xs_in) given.push_back(&x);
  const DType dt = computeDtype(op::kConcat, given);
  std::vector<Tensor> xs;
  std::int64_t rows = 0;
  for (const Tensor& x : xs_in) {
    require(x.ndim() >= 1 && x.shape().tail(1) == xs_in.front().shape().tail(1), op::kConcat, [&] {
      return fmt::format("{} and {} differ past their rows", xs_in.front().shape().str(), x.shape().str());
    });
    xs.push_back(castTo(x, dt));
    rows += x.size(0);
  }
  Shape shape = xs.front().shape();
  shape[0] = rows;
  // Recorded as the first piece and the whole result.
  const device::OperandInfo operands[] = {operandInfo(xs.front()), {shape.dims(), dt, false}};
  const OpRecord op_record = record(op::kConcat, xs.front().device(), operands);
  Tensor y = like(xs.front(), shape);
  std::vector<const Tensor*> inputs;
  std::int64_t at = 0;
  for (const Tensor& x : xs) {
    if (computes(y)) std::copy_n(x.data(), x.numel(), y.data() + at);
    at += x.numel();
    inputs.push_back(&x);
  }
  recordBackward(y, inputs, [xs, y = GradRef(y)] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    std::int64_t at = 0;
    for (const Tensor& x : xs) {
      if (wants(x)) accumulateGrad(x, computes(y) ? gy.data() + at : nullptr);
      at += x.numel();
    }
  });
  return finish(y);
}

Tensor narrow(const Tensor& x_in, int dim, std::int64_t start, std::int64_t length) {
  const int n = x_in.ndim();
  if (dim < 0) dim += n;
  require(dim >= 0 && dim < n && start >= 0 && length >= 0 && start + length <= x_in.size(dim), op::kNarrow, [&] {
    return fmt::format("positions {} .. {} of dimension {} of {}", start, start + length - 1, dim, x_in.shape().str());
  });
  const Tensor x = castTo(x_in, computeDtype(op::kNarrow, {&x_in}));
  Shape shape = x.shape();
  shape[dim] = length;
  Tensor y = like(x, shape);
  // Recorded with the slice it copies: the op moves that much, not all of x.
  const OpRecord op_record = record(op::kNarrow, {&x, &y});
  // x as [outer, size(dim) * inner] rows, of which y takes a contiguous run.
  const std::int64_t inner = x.shape().tail(dim + 1), outer = x.numel() / (x.size(dim) * inner);
  const std::int64_t row = x.size(dim) * inner, run = length * inner, at = start * inner;
  if (computes(y))
    for (std::int64_t o = 0; o < outer; ++o) std::copy_n(x.data() + o * row + at, run, y.data() + o * run);
  recordBackward(y, {&x}, [x = GradRef(x), y = GradRef(y), outer, row, run, at] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(x);
    if (g.data != nullptr) {
      if (!g.accumulate) std::fill(g.data, g.data + x.numel(), 0.0f);
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t j = 0; j < run; ++j) g.data[o * row + at + j] += gy.data()[o * run + j];
    }
    gradWritten(x);
  });
  return finish(y);
}

Tensor splitHeads(const Tensor& x, std::int64_t heads) {
  require(x.ndim() == 3 && heads > 0 && x.size(2) % heads == 0, "split_heads",
          [&] { return fmt::format("expects [B, T, heads * D] with {} heads, got {}", heads, x.shape().str()); });
  return permuteAs(x, {x.size(0), x.size(1), heads, x.size(2) / heads}, {0, 2, 1, 3});
}

Tensor mergeHeads(const Tensor& x) {
  require(x.ndim() == 4, "merge_heads", [&] { return "expects [B, heads, T, D], got " + x.shape().str(); });
  return permuteAs(x, x.shape(), {0, 2, 1, 3}, {x.size(0), x.size(2), x.size(1) * x.size(3)});
}

}  // namespace hpu::core::ops
