#include "hpu/device/kernels/activation.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "fast_exp.h"
#include "hpu/device/counter_random.h"
#include "hpu/device/element_loops.h"
#include "hpu/device/threading.h"
#include "hpu/device/vector_clones.h"

namespace hpu::device::kernels {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

struct ReLU {
  static constexpr const char* kName = "relu";
  static constexpr bool kReadsX = false, kReadsY = true;
  static float f(float x) { return x > 0.0f ? x : 0.0f; }
  static float df(float, float y) { return y > 0.0f ? 1.0f : 0.0f; }
};
struct GELU {  // exact: x * Phi(x)
  static constexpr bool kReadsX = true, kReadsY = false;
  static constexpr const char* kName = "gelu";
  static float f(float x) { return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2)); }
  static float df(float x, float) {
    return 0.5f * (1.0f + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
  }
};
struct GELUTanh {
  static constexpr bool kReadsX = true, kReadsY = false;
  static constexpr const char* kName = "gelu_tanh";
  static float f(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))); }
  static float df(float x, float) {
    const float t = std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * x * x);
  }
};
struct Tanh {
  static constexpr bool kReadsX = false, kReadsY = true;
  static constexpr const char* kName = "tanh";
  static float f(float x) { return std::tanh(x); }
  static float df(float, float y) { return 1.0f - y * y; }
};
struct Sigmoid {
  static constexpr bool kReadsX = false, kReadsY = true;
  static constexpr const char* kName = "sigmoid";
  static float f(float x) { return 1.0f / (1.0f + std::exp(-x)); }
  static float df(float, float y) { return y * (1.0f - y); }
};

struct SiLU {  // x * sigmoid(x)
  static constexpr const char* kName = "silu";
  static constexpr bool kReadsX = true, kReadsY = false;
  static float sigmoid(float x) { return 1.0f / (1.0f + detail::fastExp(-x)); }
  static float f(float x) { return x * sigmoid(x); }
  static float df(float x, float) {
    const float s = sigmoid(x);
    return s + x * s * (1.0f - s);
  }
};

// The loops over a block, on restrict pointers to it (so that they vectorise).
template <class F>
void forwardBlock(const float* __restrict x, float* __restrict y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = F::f(x[i]);
}

template <class F, bool kAdd>
void backwardBlock(const float* __restrict x, const float* __restrict y, const float* __restrict dy,
                   float* __restrict dx, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float d = dy[i] * F::df(F::kReadsX ? x[i] : 0.0f, F::kReadsY ? y[i] : 0.0f);
    dx[i] = kAdd ? dx[i] + d : d;
  }
}

template <class F>
void forward(const float* x, float* y, std::int64_t n) {
  static ParallelSite site(std::string(F::kName) + " forward");
  forElementRanges(site, n, [=](std::int64_t i0, std::int64_t i1) { forwardBlock<F>(x + i0, y + i0, i1 - i0); });
}

template <class F>
void backward(const float* x, const float* y, const float* dy, float* dx, std::int64_t n, bool accumulate) {
  static ParallelSite site(std::string(F::kName) + " backward");
  forElementRanges(site, n, [=](std::int64_t i0, std::int64_t i1) {
    const float* xb = F::kReadsX ? x + i0 : nullptr;
    const float* yb = F::kReadsY ? y + i0 : nullptr;
    if (accumulate)
      backwardBlock<F, true>(xb, yb, dy + i0, dx + i0, i1 - i0);
    else
      backwardBlock<F, false>(xb, yb, dy + i0, dx + i0, i1 - i0);
  });
}

void swigluForwardBlock(const float* __restrict gate, const float* __restrict up, float* __restrict y, std::int64_t n) {
  onVectorLevel([&]() HPU_LOOP_BODY {
    for (std::int64_t i = 0; i < n; ++i) y[i] = SiLU::f(gate[i]) * up[i];
  });
}

void swigluInPlaceBlock(float* __restrict gate, const float* __restrict up, std::int64_t n) {
  onVectorLevel([&]() HPU_LOOP_BODY {
    for (std::int64_t i = 0; i < n; ++i) gate[i] = SiLU::f(gate[i]) * up[i];
  });
}

// d/dgate and d/dup of silu(gate) * up over a block, into the gradients
// wanted (kGate, kUp), added when kAdd.
template <bool kGate, bool kUp, bool kAdd>
HPU_LOOP_BODY inline void swigluBackwardBlock(const float* __restrict gate, const float* __restrict up, const float* __restrict dy,
                         float* __restrict dgate, float* __restrict dup, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float s = SiLU::sigmoid(gate[i]), silu = gate[i] * s;
    if constexpr (kGate) {
      const float dg = dy[i] * up[i] * (s + silu * (1.0f - s));
      dgate[i] = kAdd ? dgate[i] + dg : dg;
    }
    if constexpr (kUp) dup[i] = kAdd ? dup[i] + dy[i] * silu : dy[i] * silu;
  }
}

// Pairs [0, pairs) of a span of dropout's stream that starts at pair q0:
// pair k shares draw q0 + k, its low half for element 2k, its high half for
// 2k + 1. kInPlace: y is also the input (the GEMM epilogue), x unused.
template <bool kInPlace>
HPU_LOOP_BODY inline void dropoutPairsLoop(std::uint64_t key, std::uint32_t threshold, float keep, std::uint64_t q0,
                                           const float* __restrict x, float* __restrict y, float* __restrict mask,
                                           std::int64_t pairs) {
  const float* __restrict in = kInPlace ? y : x;
  for (std::int64_t k = 0; k < pairs; ++k) {
    const std::uint64_t r = counterDraw(key, q0 + static_cast<std::uint64_t>(k));
    const float m0 = static_cast<std::uint32_t>(r) < threshold ? 0.0f : keep;
    const float m1 = static_cast<std::uint32_t>(r >> 32) < threshold ? 0.0f : keep;
    mask[2 * k] = m0;
    mask[2 * k + 1] = m1;
    const float v0 = in[2 * k] * m0, v1 = in[2 * k + 1] * m1;
    y[2 * k] = v0;
    y[2 * k + 1] = v1;
  }
}

template <bool kAdd>
void dropoutBackwardBlock(const float* __restrict mask, const float* __restrict dy, float* __restrict dx,
                          std::int64_t n) {
  onVectorLevel([&]() HPU_LOOP_BODY {
    for (std::int64_t i = 0; i < n; ++i) dx[i] = kAdd ? dx[i] + dy[i] * mask[i] : dy[i] * mask[i];
  });
}

// Both gradients (a Llama MLP's gate and up projections train), in copies
// per instruction set.
void swigluBackwardBoth(const float* gate, const float* up, const float* dy, float* dgate, float* dup, std::int64_t n) {
  onVectorLevel([&]() HPU_LOOP_BODY { swigluBackwardBlock<true, true, false>(gate, up, dy, dgate, dup, n); });
}
void swigluBackwardBothAdd(const float* gate, const float* up, const float* dy, float* dgate, float* dup,
                           std::int64_t n) {
  onVectorLevel([&]() HPU_LOOP_BODY { swigluBackwardBlock<true, true, true>(gate, up, dy, dgate, dup, n); });
}

template <template <class> class Run, class... Args>
auto dispatch(Activation a, Args&&... args) {
  switch (a) {
    case Activation::kReLU:
      return Run<ReLU>::go(args...);
    case Activation::kGELU:
      return Run<GELU>::go(args...);
    case Activation::kGELUTanh:
      return Run<GELUTanh>::go(args...);
    case Activation::kTanh:
      return Run<Tanh>::go(args...);
    case Activation::kSigmoid:
      return Run<Sigmoid>::go(args...);
    case Activation::kSiLU:
      return Run<SiLU>::go(args...);
  }
  __builtin_unreachable();
}

template <class F>
struct Forward {
  static void go(const float* x, float* y, std::int64_t n) { forward<F>(x, y, n); }
};
template <class F>
struct Reads {
  static ActivationReads go() { return {F::kReadsX, F::kReadsY}; }
};
template <class F>
struct Backward {
  static void go(const float* x, const float* y, const float* dy, float* dx, std::int64_t n, bool acc) {
    backward<F>(x, y, dy, dx, n, acc);
  }
};

}  // namespace

void activationForward(Activation a, const float* x, float* y, std::int64_t n) { dispatch<Forward>(a, x, y, n); }

ActivationReads activationBackwardReads(Activation a) { return dispatch<Reads>(a); }

void activationBackward(Activation a, const float* x, const float* y, const float* dy, float* dx, std::int64_t n,
                        bool accumulate) {
  dispatch<Backward>(a, x, y, dy, dx, n, accumulate);
}

void swigluForward(const float* gate, const float* up, float* y, std::int64_t n) {
  static ParallelSite site("swiglu forward");
  forElementRanges(site, n, [=](std::int64_t i0, std::int64_t i1) {
    if (y == gate)
      swigluInPlaceBlock(y + i0, up + i0, i1 - i0);
    else
      swigluForwardBlock(gate + i0, up + i0, y + i0, i1 - i0);
  });
}

void swigluBackward(const float* gate, const float* up, const float* dy, float* dgate, float* dup, std::int64_t n,
                    bool accumulate) {
  static ParallelSite site("swiglu backward");
  forElementRanges(site, n, [=](std::int64_t i0, std::int64_t i1) {
    const auto run = [&]<bool kGate, bool kUp>() {
      float* dg = kGate ? dgate + i0 : nullptr;
      float* du = kUp ? dup + i0 : nullptr;
      if (accumulate)
        swigluBackwardBlock<kGate, kUp, true>(gate + i0, up + i0, dy + i0, dg, du, i1 - i0);
      else
        swigluBackwardBlock<kGate, kUp, false>(gate + i0, up + i0, dy + i0, dg, du, i1 - i0);
    };
    if (dgate != nullptr && dup != nullptr)
      (accumulate ? swigluBackwardBothAdd : swigluBackwardBoth)(gate + i0, up + i0, dy + i0, dgate + i0, dup + i0,
                                                              i1 - i0);
    else if (dgate != nullptr)
      run.template operator()<true, false>();
    else if (dup != nullptr)
      run.template operator()<false, true>();
  });
}

// A draw decides two elements: p x 2^32, clamped below 2^32 (p < 1).
DropoutDraw::DropoutDraw(std::uint64_t k, float p)
    : key(k),
      threshold(static_cast<std::uint32_t>(std::min(static_cast<double>(p) * 4294967296.0, 4294967295.0))),
      keep(1.0f / (1.0f - p)) {}

float DropoutDraw::maskAt(std::int64_t i) const {
  const std::uint64_t r = counterDraw(key, static_cast<std::uint64_t>(i / 2));
  const auto half = static_cast<std::uint32_t>(i % 2 != 0 ? r >> 32 : r);
  return half < threshold ? 0.0f : keep;
}

void DropoutDraw::apply(std::int64_t first, const float* x, float* y, float* mask, std::int64_t n) const {
  std::int64_t i = 0;
  const auto one = [&](std::int64_t e) {  // an element whose pair the span splits
    mask[e] = maskAt(first + e);
    y[e] = x[e] * mask[e];
  };
  if (n > 0 && first % 2 != 0) one(i++);
  const std::int64_t pairs = (n - i) / 2;
  const auto q0 = static_cast<std::uint64_t>((first + i) / 2);
  if (x == y)
    onVectorLevel([&]() HPU_LOOP_BODY { dropoutPairsLoop<true>(key, threshold, keep, q0, x, y + i, mask + i, pairs); });
  else
    onVectorLevel([&]() HPU_LOOP_BODY { dropoutPairsLoop<false>(key, threshold, keep, q0, x + i, y + i, mask + i, pairs); });
  if (i + 2 * pairs < n) one(n - 1);
}

void dropoutForward(std::uint64_t key, float p, const float* x, float* y, float* mask, std::int64_t n) {
  static ParallelSite site("dropout forward");
  const DropoutDraw draw(key, p);
  parallelFor(site, n, 1 << 10, static_cast<double>(n), [=](std::int64_t i0, std::int64_t i1) {
    draw.apply(i0, x + i0, y + i0, mask + i0, i1 - i0);
  });
}

void reluDropoutBackward(const float* mask, const float* y, const float* dy, float* dz, std::int64_t n) {
  static ParallelSite site("relu dropout backward");
  forElementRanges(site, n, [=](std::int64_t i0, std::int64_t i1) {
    onVectorLevel([&]() HPU_LOOP_BODY {
      for (std::int64_t i = i0; i < i1; ++i) dz[i] = (dy[i] * mask[i]) * ReLU::df(y[i], y[i]);
    });
  });
}

void dropoutBackward(const float* mask, const float* dy, float* dx, std::int64_t n, bool accumulate) {
  static ParallelSite site("dropout backward");
  forElementRanges(site, n, [=](std::int64_t i0, std::int64_t i1) {
    if (accumulate)
      dropoutBackwardBlock<true>(mask + i0, dy + i0, dx + i0, i1 - i0);
    else
      dropoutBackwardBlock<false>(mask + i0, dy + i0, dx + i0, i1 - i0);
  });
}

}  // namespace hpu::device::kernels
