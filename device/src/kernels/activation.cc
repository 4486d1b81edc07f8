#include "hpu/device/kernels/activation.h"

#include <cmath>

#include "fast_exp.h"

namespace hpu::device::kernels {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

struct ReLU {
  static float f(float x) { return x > 0.0f ? x : 0.0f; }
  static float df(float, float y) { return y > 0.0f ? 1.0f : 0.0f; }
};
struct GELU {  // exact: x * Phi(x)
  static float f(float x) { return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2)); }
  static float df(float x, float) { return 0.5f * (1.0f + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x); }
};
struct GELUTanh {
  static float f(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))); }
  static float df(float x, float) {
    const float t = std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * x * x);
  }
};
struct Tanh {
  static float f(float x) { return std::tanh(x); }
  static float df(float, float y) { return 1.0f - y * y; }
};
struct Sigmoid {
  static float f(float x) { return 1.0f / (1.0f + std::exp(-x)); }
  static float df(float, float y) { return y * (1.0f - y); }
};

struct SiLU {  // x * sigmoid(x)
  static float sigmoid(float x) { return 1.0f / (1.0f + detail::fastExp(-x)); }
  static float f(float x) { return x * sigmoid(x); }
  static float df(float x, float y) {
    const float s = sigmoid(x);
    return s + y * (1.0f - s);
  }
};

template <class F>
void forward(const float* __restrict x, float* __restrict y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = F::f(x[i]);
}

template <class F>
void backward(const float* __restrict x, const float* __restrict y, const float* __restrict dy, float* __restrict dx,
              std::int64_t n, bool accumulate) {
  if (accumulate)
    for (std::int64_t i = 0; i < n; ++i) dx[i] += dy[i] * F::df(x[i], y[i]);
  else
    for (std::int64_t i = 0; i < n; ++i) dx[i] = dy[i] * F::df(x[i], y[i]);
}

template <template <class> class Run, class... Args>
void dispatch(Activation a, Args&&... args) {
  switch (a) {
    case Activation::kReLU: return Run<ReLU>::go(args...);
    case Activation::kGELU: return Run<GELU>::go(args...);
    case Activation::kGELUTanh: return Run<GELUTanh>::go(args...);
    case Activation::kTanh: return Run<Tanh>::go(args...);
    case Activation::kSigmoid: return Run<Sigmoid>::go(args...);
    case Activation::kSiLU: return Run<SiLU>::go(args...);
  }
}

template <class F>
struct Forward {
  static void go(const float* x, float* y, std::int64_t n) { forward<F>(x, y, n); }
};
template <class F>
struct Backward {
  static void go(const float* x, const float* y, const float* dy, float* dx, std::int64_t n, bool acc) {
    backward<F>(x, y, dy, dx, n, acc);
  }
};

}  // namespace

void activationForward(Activation a, const float* x, float* y, std::int64_t n) { dispatch<Forward>(a, x, y, n); }

void activationBackward(Activation a, const float* x, const float* y, const float* dy, float* dx, std::int64_t n,
                        bool accumulate) {
  dispatch<Backward>(a, x, y, dy, dx, n, accumulate);
}

void swigluForward(const float* __restrict gate, const float* __restrict up, float* __restrict y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = SiLU::f(gate[i]) * up[i];
}

void swigluBackward(const float* __restrict gate, const float* __restrict up, const float* __restrict dy,
                    float* __restrict dgate, float* __restrict dup, std::int64_t n, bool accumulate) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float s = SiLU::sigmoid(gate[i]), silu = gate[i] * s;
    const float dg = dy[i] * up[i] * (s + silu * (1.0f - s)), du = dy[i] * silu;
    if (dgate != nullptr) dgate[i] = accumulate ? dgate[i] + dg : dg;
    if (dup != nullptr) dup[i] = accumulate ? dup[i] + du : du;
  }
}

}  // namespace hpu::device::kernels
