// Elementwise arithmetic on equal shapes, scaling and reductions.
#include "hpu/core/ops/ops.h"
#include "op_support.h"

namespace hpu::core::ops {

using namespace detail;

namespace {

// a (op) b elementwise on equal shapes; backward gives da = dy * da_coef and
// db = dy * db_coef, both functions of (a, b) when kReadsOperands (then the
// backward keeps a and b), else constants (called with zeros).
template <bool kReadsOperands, class F, class DA, class DB>
Tensor binary(const OpInfo& op, const Tensor& a_in, const Tensor& b_in, F f, DA da, DB db) {
  require(a_in.shape() == b_in.shape(), op, [&] {
    return fmt::format("shapes {} and {} differ (no broadcasting)", a_in.shape().str(), b_in.shape().str());
  });
  const DType dt = computeDtype(op, {&a_in, &b_in});
  const Tensor a = castTo(a_in, dt), b = castTo(b_in, dt);
  const OpRecord op_record = record(op, {&a, &b});
  const std::int64_t n = a.numel();
  Tensor y = like(a, a.shape());
  if (computes(y)) {
    const float *pa = a.data(), *pb = b.data();
    float* py = y.data();
    static device::ParallelSite site(op.str());
    device::forElements(site, n, [=](std::int64_t begin, std::int64_t end) HPU_LOOP_BODY {
      for (std::int64_t i = begin; i < end; ++i) py[i] = f(pa[i], pb[i]);
    });
  }
  const Tensor a_saved = kReadsOperands ? a : Tensor(), b_saved = kReadsOperands ? b : Tensor();
  recordBackward(y, {&a, &b}, [a = GradRef(a), b = GradRef(b), a_saved, b_saved, y = GradRef(y), n, da, db,
                               name = op.str()] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    auto grad = [&](const GradRef& t, auto coef) {
      if (!t.requiresGrad()) return;
      const float* dy = gy.data();
      if constexpr (!kReadsOperands) {  // a constant coefficient: dy scaled (add's 1: a copy or a sum)
        accumulateScaledGrad(t, dy, coef(0.0f, 0.0f));
      } else {
        GradTarget g = gradTarget(t);
        if (g.data != nullptr) {
          const float *pa = a_saved.data(), *pb = b_saved.data();
          static device::ParallelSite site(fmt::format("{} backward", name));
          device::forElements(site, n, [&](std::int64_t begin, std::int64_t end) HPU_LOOP_BODY {
            float* __restrict dst = g.data;
            for (std::int64_t i = begin; i < end; ++i) {
              const float d = dy[i] * coef(pa[i], pb[i]);
              dst[i] = g.accumulate ? dst[i] + d : d;
            }
          });
        }
        gradWritten(t);
      }
    };
    grad(a, da);
    grad(b, db);
  });
  return finish(y);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binary<false>(
      op::kAdd, a, b, [](float x, float y) { return x + y; }, [](float, float) { return 1.0f; },
      [](float, float) { return 1.0f; });
}

Tensor add(const Tensor& a_in, Tensor&& b) {
  Tensor y = takeOverAtLastUse(op::kAdd, b, a_in);
  if (!y.defined()) return add(a_in, static_cast<const Tensor&>(b));
  const Tensor a = castTo(a_in, y.dtype());
  const OpRecord op_record = record(op::kAdd, {&a, &y});  // y holds b until the kernel runs
  if (computes(y)) {
    const float* pa = a.data();
    float* py = y.data();
    static device::ParallelSite site("add in place");
    device::forElements(site, y.numel(), [=](std::int64_t begin, std::int64_t end) HPU_LOOP_BODY {
      for (std::int64_t i = begin; i < end; ++i) py[i] = pa[i] + py[i];
    });
  }
  return finish(y);
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary<false>(
      op::kSub, a, b, [](float x, float y) { return x - y; }, [](float, float) { return 1.0f; },
      [](float, float) { return -1.0f; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary<true>(
      op::kMul, a, b, [](float x, float y) { return x * y; }, [](float, float y) { return y; },
      [](float x, float) { return x; });
}

Tensor scale(const Tensor& a_in, float s) {
  const Tensor a = castTo(a_in, computeDtype(op::kScale, {&a_in}));
  const OpRecord op_record = record(op::kScale, {&a});
  Tensor y = like(a, a.shape());
  if (computes(y)) {
    const float* pa = a.data();
    float* py = y.data();
    static device::ParallelSite site("scale");
    device::forElements(site, a.numel(), [=](std::int64_t begin, std::int64_t end) HPU_LOOP_BODY {
      for (std::int64_t i = begin; i < end; ++i) py[i] = pa[i] * s;
    });
  }
  recordBackward(y, {&a}, [a = GradRef(a), y = GradRef(y), s] {
    if (Tensor gy = y.grad(); gy.defined()) accumulateScaledGrad(a, gy.data(), s);
  });
  return finish(y);
}

Tensor sum(const Tensor& a_in) {
  const Tensor a = castTo(a_in, computeDtype(op::kSum, {&a_in}));
  const OpRecord op_record = record(op::kSum, {&a});
  double total = 0;
  if (computes(a))
    for (float v : a.values()) total += v;
  Tensor y = scalar(a.device(), total);
  recordBackward(y, {&a}, [a = GradRef(a), y = GradRef(y)] {
    Tensor gy = y.grad();
    if (!gy.defined()) return;
    GradTarget g = gradTarget(a);
    if (g.data != nullptr) {
      const float d = gy.item();
      for (std::int64_t i = 0; i < a.numel(); ++i) g.data[i] = g.accumulate ? g.data[i] + d : d;
    }
    gradWritten(a);
  });
  return y;
}

Tensor mean(const Tensor& a) { return scale(sum(a), 1.0f / static_cast<float>(a.numel())); }

}  // namespace hpu::core::ops
