#include "op_support.h"

#include <algorithm>
#include <array>

#include "hpu/core/ops/autocast.h"
#include "hpu/device/kernels/gemm.h"
#include "hpu/device/kernels/layout.h"
#include "hpu/device/numerics.h"
#include "hpu/device/threading.h"

namespace hpu::core::ops::detail {

OpRecord record(device::OpName name, std::initializer_list<const Tensor*> operands) {
  std::array<device::OperandInfo, 4> infos;
  std::size_t n = 0;
  const Tensor* first = nullptr;
  for (const Tensor* t : operands)
    if (t != nullptr && t->defined()) {
      infos[n++] = operandInfo(*t);
      if (first == nullptr) first = t;
    }
  return OpRecord(first->device(), name, std::span<const device::OperandInfo>(infos.data(), n));
}

OpRecord record(const OpInfo& op, device::Device& device, std::span<const device::OperandInfo> operands) {
  return OpRecord(device, op.name, operands);
}

DType computeDtype(const OpInfo& op, std::span<const Tensor* const> inputs) {
  DType best = DType::kFloat32;
  bool any = false;
  for (const Tensor* t : inputs) {
    if (t == nullptr || !t->defined() || !device::isFloating(t->dtype())) continue;
    const DType d = t->dtype();
    if (!any) {
      best = d;
      any = true;
    } else if (d != best) {
      const auto size = device::logicalSize(d), best_size = device::logicalSize(best);
      best = size > best_size ? d : size < best_size ? best : DType::kFloat32;
    }
  }
  return autocast::computeDtype(op, best);
}

Tensor castTo(const Tensor& x, DType dt) {
  if (!x.defined() || x.dtype() == dt || !device::isFloating(x.dtype())) return x;
  const OpRecord op_record = record("cast", {&x});
  Tensor y = Tensor::empty(x.device(), x.shape(), dt);
  if (computes(y)) device::roundCopy(x.values(), y.values(), dt);
  recordBackward(y, {&x}, [x = GradRef(x), y = GradRef(y)] {
    if (Tensor gy = y.grad(); gy.defined()) accumulateGrad(x, gy.data());
  });
  return y;
}

Tensor like(const Tensor& t, const Shape& shape) {
  return Tensor::empty(t.device(), shape, device::isFloating(t.dtype()) ? t.dtype() : DType::kFloat32);
}

Tensor finish(Tensor y) {
  if (y.dtype() != DType::kFloat32 && device::isFloating(y.dtype()) && computes(y))
    device::roundInPlace(y.values(), y.dtype());
  return y;
}

Tensor scalar(device::Device& dev, double value) {
  return Tensor::full(dev, {1}, static_cast<float>(value)).reshaped(Shape{});
}

Tensor takeOverAtLastUse(Tensor& input, std::initializer_list<const Tensor*> inputs) {
  if (!input.soleOwner() || !device::isFloating(input.dtype()) || autograd::needsGrad(inputs)) return Tensor();
  Tensor y = Tensor::view(input.storage(), input.storageOffset(), input.shape(), input.dtype());
  input = Tensor();
  return y;
}

Tensor takeOverAtLastUse(const OpInfo& op, Tensor& input, const Tensor& other) {
  if (input.dtype() != computeDtype(op, {&input, &other}) || input.shape() != other.shape() || input.sameAs(other))
    return Tensor();
  return takeOverAtLastUse(input, {&input, &other});
}

bool wants(const Tensor& t) { return t.defined() && t.requiresGrad(); }
bool wants(const GradRef& t) { return t.requiresGrad(); }

void track(Tensor& out, std::span<const Tensor* const> inputs) {
  out.setRequiresGrad(true);
  for (const Tensor* t : inputs)
    if (t != nullptr && t->defined() && t->requiresGrad()) autograd::noteUse(*t);
}

GradTargets gradTargets(const GradRef& x, const GradRef& w, const GradRef& b) {
  GradTargets g{{nullptr, false}, {nullptr, false}, {nullptr, false}};
  if (wants(x)) g.x = gradTarget(x);
  if (wants(w)) g.w = gradTarget(w);
  if (wants(b)) g.b = gradTarget(b);
  return g;
}

void gradsWritten(const GradRef& x, const GradRef& w, const GradRef& b) {
  for (const GradRef* t : {&x, &w, &b})
    if (wants(*t)) gradWritten(*t);
}

void accumulateGrad(const GradRef& t, const float* src) {
  GradTarget g = gradTarget(t);
  const std::int64_t n = t.numel();
  if (g.data == nullptr) {
  } else if (g.accumulate) {
    static device::ParallelSite site("accumulate gradient");
    device::forElements(site, n, [dst = g.data, src](std::int64_t begin, std::int64_t end) HPU_LOOP_BODY {
      for (std::int64_t i = begin; i < end; ++i) dst[i] += src[i];
    });
  } else {
    device::kernels::copy(src, g.data, n);
  }
  gradWritten(t);
}

void accumulateScaledGrad(const GradRef& t, const float* src, float scale) {
  if (scale == 1.0f) return accumulateGrad(t, src);  // the same values: src * 1 is src
  GradTarget g = gradTarget(t);
  if (g.data != nullptr) {
    static device::ParallelSite site("accumulate scaled gradient");
    device::forElements(site, t.numel(), [&](std::int64_t begin, std::int64_t end) HPU_LOOP_BODY {
      float* __restrict dst = g.data;
      if (g.accumulate)
        for (std::int64_t i = begin; i < end; ++i) dst[i] += src[i] * scale;
      else
        for (std::int64_t i = begin; i < end; ++i) dst[i] = src[i] * scale;
    });
  }
  gradWritten(t);
}

void gemmGrad(const GradRef& target, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
              const float* b, device::kernels::GemmOperands operands) {
  GradTarget g = gradTarget(target);
  if (g.data != nullptr) device::kernels::gemm(ta, tb, m, n, k, a, b, g.accumulate ? 1.0f : 0.0f, g.data, operands);
  gradWritten(target);
}

device::kernels::GemmOperands gemmOperands(std::initializer_list<DType> dtypes) {
  for (DType d : dtypes)
    if (d != DType::kBFloat16) return device::kernels::GemmOperands::kFloat32;
  return device::kernels::GemmOperands::kBFloat16;
}

}  // namespace hpu::core::ops::detail
