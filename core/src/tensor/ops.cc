#include "hpu/core/tensor/ops.h"

#include <Eigen/Core>
#include <omp.h>
#include <spdlog/fmt/fmt.h>

#include <cmath>
#include <numbers>

#include "hpu/core/errors.h"
#include "hpu/core/tensor/autograd.h"
#include "hpu/device/check.h"

namespace hpu::core::ops {
namespace {

using autograd::GradTarget;
using autograd::gradTarget;
using autograd::gradWritten;
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMajor>;
using ConstMatMap = Eigen::Map<const RowMajor>;
using VecMap = Eigen::Map<Eigen::VectorXf>;
using ConstVecMap = Eigen::Map<const Eigen::VectorXf>;

// Records an op in the device's lazy graph.
template <std::size_t N>
void recordOp(device::OpName name, const std::array<const Tensor*, N>& operands) {
  std::array<device::OperandInfo, N> infos;
  std::size_t n = 0;
  for (const Tensor* t : operands)
    if (t != nullptr && t->defined()) infos[n++] = operandInfo(*t);
  operands[0]->device().graph().recordOp(name, std::span<const device::OperandInfo>(infos.data(), n));
}

Tensor like(const Tensor& t, const Shape& shape) { return Tensor::empty(t.device(), shape); }

// Output of an op that records a backward: marks it and counts input uses.
void track(Tensor& out, std::initializer_list<const Tensor*> inputs) {
  out.setRequiresGrad(true);
  for (const Tensor* t : inputs)
    if (t != nullptr && t->defined() && t->requiresGrad()) autograd::noteUse(*t);
}

// Adds `src` (n values) into the gradient of t.
void accumulateGrad(const Tensor& t, const float* src, std::int64_t n) {
  GradTarget g = gradTarget(t);
  if (g.accumulate)
    for (std::int64_t i = 0; i < n; ++i) g.data[i] += src[i];
  else
    std::copy(src, src + n, g.data);
  gradWritten(t);
}

void requireShape(bool ok, const char* op, const std::string& what) {
  if (!ok) throw Error(fmt::format("{}: {}", op, what));
}

template <class Fwd, class Bwd>
Tensor unary(device::OpName name, const Tensor& x, Fwd fwd, Bwd bwd_from_xy) {
  recordOp<1>(name, {&x});
  Tensor y = like(x, x.shape());
  const std::int64_t n = x.numel();
  const float* xp = x.data();
  float* yp = y.data();
#pragma omp parallel for simd if (n > (1 << 16))
  for (std::int64_t i = 0; i < n; ++i) yp[i] = fwd(xp[i]);
  if (autograd::needsGrad({&x})) {
    track(y, {&x});
    autograd::currentTape()->record([x, y, n, bwd_from_xy] {
      Tensor gy = y.grad();
      if (!gy.defined() || !x.requiresGrad()) return;
      GradTarget g = gradTarget(x);
      const float* dy = gy.data();
      const float* xp = x.data();
      const float* yp = y.data();
#pragma omp parallel for simd if (n > (1 << 16))
      for (std::int64_t i = 0; i < n; ++i) {
        const float d = dy[i] * bwd_from_xy(xp[i], yp[i]);
        g.data[i] = g.accumulate ? g.data[i] + d : d;
      }
      gradWritten(x);
    });
  }
  return y;
}

}  // namespace

// ------------------------------------------------------------------ linear

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  requireShape(x.ndim() >= 1 && w.ndim() == 2 && x.size(-1) == w.size(1), "linear",
               fmt::format("input {} does not match weight {}", x.shape().str(), w.shape().str()));
  recordOp<3>("linear", {&x, &w, &b});
  const std::int64_t in = w.size(1), out = w.size(0), n = x.numel() / in;
  Shape ys = x.shape();
  ys[-1] = out;
  Tensor y = like(x, ys);
  MatMap Y(y.data(), n, out);
  Y.noalias() = ConstMatMap(x.data(), n, in) * ConstMatMap(w.data(), out, in).transpose();
  if (b.defined()) Y.rowwise() += ConstVecMap(b.data(), out).transpose();
  if (autograd::needsGrad({&x, &w, &b})) {
    track(y, {&x, &w, &b});
    autograd::currentTape()->record([x, w, b, y, n, in, out] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      ConstMatMap dY(gy.data(), n, out);
      if (w.requiresGrad()) {
        GradTarget g = gradTarget(w);
        MatMap dW(g.data, out, in);
        if (g.accumulate)
          dW.noalias() += dY.transpose() * ConstMatMap(x.data(), n, in);
        else
          dW.noalias() = dY.transpose() * ConstMatMap(x.data(), n, in);
        gradWritten(w);
      }
      if (b.defined() && b.requiresGrad()) {
        GradTarget g = gradTarget(b);
        VecMap db(g.data, out);
        if (g.accumulate)
          db += dY.colwise().sum().transpose();
        else
          db = dY.colwise().sum().transpose();
        gradWritten(b);
      }
      if (x.requiresGrad()) {
        GradTarget g = gradTarget(x);
        MatMap dX(g.data, n, in);
        if (g.accumulate)
          dX.noalias() += dY * ConstMatMap(w.data(), out, in);
        else
          dX.noalias() = dY * ConstMatMap(w.data(), out, in);
        gradWritten(x);
      }
    });
  }
  return y;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  requireShape(a.ndim() == 2 && b.ndim() == 2 && a.size(1) == b.size(0), "matmul",
               fmt::format("shapes {} and {} do not chain", a.shape().str(), b.shape().str()));
  recordOp<2>("matmul", {&a, &b});
  const std::int64_t n = a.size(0), k = a.size(1), m = b.size(1);
  Tensor y = like(a, {n, m});
  MatMap(y.data(), n, m).noalias() = ConstMatMap(a.data(), n, k) * ConstMatMap(b.data(), k, m);
  if (autograd::needsGrad({&a, &b})) {
    track(y, {&a, &b});
    autograd::currentTape()->record([a, b, y, n, k, m] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      ConstMatMap dY(gy.data(), n, m);
      if (a.requiresGrad()) {
        GradTarget g = gradTarget(a);
        MatMap dA(g.data, n, k);
        if (g.accumulate)
          dA.noalias() += dY * ConstMatMap(b.data(), k, m).transpose();
        else
          dA.noalias() = dY * ConstMatMap(b.data(), k, m).transpose();
        gradWritten(a);
      }
      if (b.requiresGrad()) {
        GradTarget g = gradTarget(b);
        MatMap dB(g.data, k, m);
        if (g.accumulate)
          dB.noalias() += ConstMatMap(a.data(), n, k).transpose() * dY;
        else
          dB.noalias() = ConstMatMap(a.data(), n, k).transpose() * dY;
        gradWritten(b);
      }
    });
  }
  return y;
}

// ------------------------------------------------------------------ conv2d

namespace {
struct ConvGeom {
  std::int64_t n, c, h, w, k, r, s, stride, pad, oh, ow;
  std::int64_t crs() const { return c * r * s; }
  std::int64_t p() const { return oh * ow; }
};

// col[(c*r+i)*s+j][oy*ow+ox] = x[c][oy*stride+i-pad][ox*stride+j-pad] (0 outside).
void im2col(const ConvGeom& g, const float* x, float* col) {
  for (std::int64_t c = 0; c < g.c; ++c)
    for (std::int64_t i = 0; i < g.r; ++i)
      for (std::int64_t j = 0; j < g.s; ++j) {
        float* row = col + ((c * g.r + i) * g.s + j) * g.p();
        for (std::int64_t oy = 0; oy < g.oh; ++oy) {
          const std::int64_t iy = oy * g.stride + i - g.pad;
          float* dst = row + oy * g.ow;
          if (iy < 0 || iy >= g.h) {
            std::fill(dst, dst + g.ow, 0.0f);
            continue;
          }
          const float* src = x + (c * g.h + iy) * g.w;
          for (std::int64_t ox = 0; ox < g.ow; ++ox) {
            const std::int64_t ix = ox * g.stride + j - g.pad;
            dst[ox] = ix >= 0 && ix < g.w ? src[ix] : 0.0f;
          }
        }
      }
}

void col2imAdd(const ConvGeom& g, const float* col, float* x) {
  for (std::int64_t c = 0; c < g.c; ++c)
    for (std::int64_t i = 0; i < g.r; ++i)
      for (std::int64_t j = 0; j < g.s; ++j) {
        const float* row = col + ((c * g.r + i) * g.s + j) * g.p();
        for (std::int64_t oy = 0; oy < g.oh; ++oy) {
          const std::int64_t iy = oy * g.stride + i - g.pad;
          if (iy < 0 || iy >= g.h) continue;
          float* dst = x + (c * g.h + iy) * g.w;
          const float* src = row + oy * g.ow;
          for (std::int64_t ox = 0; ox < g.ow; ++ox) {
            const std::int64_t ix = ox * g.stride + j - g.pad;
            if (ix >= 0 && ix < g.w) dst[ix] += src[ox];
          }
        }
      }
}
}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o) {
  requireShape(x.ndim() == 4 && w.ndim() == 4 && x.size(1) == w.size(1), "conv2d",
               fmt::format("input {} does not match weight {}", x.shape().str(), w.shape().str()));
  requireShape(o.stride >= 1 && o.padding >= 0, "conv2d",
               fmt::format("stride {} and padding {}: expected stride >= 1, padding >= 0", o.stride, o.padding));
  ConvGeom g{x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), w.size(3), o.stride, o.padding, 0, 0};
  // Checked before dividing: C++ division truncates toward zero, so a kernel
  // up to stride-1 larger than the padded input would yield one output row.
  requireShape(g.h + 2 * g.pad >= g.r && g.w + 2 * g.pad >= g.s, "conv2d", "kernel larger than the padded input");
  g.oh = (g.h + 2 * g.pad - g.r) / g.stride + 1;
  g.ow = (g.w + 2 * g.pad - g.s) / g.stride + 1;
  recordOp<3>("conv2d", {&x, &w, &b});
  Tensor y = like(x, {g.n, g.k, g.oh, g.ow});
  Eigen::setNbThreads(1);
#pragma omp parallel
  {
    std::vector<float> col(static_cast<std::size_t>(g.crs() * g.p()));
#pragma omp for
    for (std::int64_t n = 0; n < g.n; ++n) {
      im2col(g, x.data() + n * g.c * g.h * g.w, col.data());
      MatMap Y(y.data() + n * g.k * g.p(), g.k, g.p());
      Y.noalias() = ConstMatMap(w.data(), g.k, g.crs()) * ConstMatMap(col.data(), g.crs(), g.p());
      if (b.defined()) Y.colwise() += ConstVecMap(b.data(), g.k);
    }
  }
  Eigen::setNbThreads(0);
  if (autograd::needsGrad({&x, &w, &b})) {
    track(y, {&x, &w, &b});
    autograd::currentTape()->record([x, w, b, y, g] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      const float* dy = gy.data();
      if (b.defined() && b.requiresGrad()) {
        std::vector<float> db(static_cast<std::size_t>(g.k), 0.0f);
        for (std::int64_t n = 0; n < g.n; ++n)
          for (std::int64_t k = 0; k < g.k; ++k)
            db[static_cast<std::size_t>(k)] += ConstVecMap(dy + (n * g.k + k) * g.p(), g.p()).sum();
        accumulateGrad(b, db.data(), g.k);
      }
      const bool need_w = w.requiresGrad(), need_x = x.requiresGrad();
      GradTarget gx{nullptr, false};
      if (need_x) {
        gx = gradTarget(x);
        if (!gx.accumulate) std::fill(gx.data, gx.data + x.numel(), 0.0f);
      }
      const int threads = Eigen::nbThreads();
      std::vector<RowMajor> dw_parts(static_cast<std::size_t>(need_w ? threads : 0), RowMajor::Zero(g.k, g.crs()));
      Eigen::setNbThreads(1);
#pragma omp parallel num_threads(threads)
      {
        std::vector<float> col(static_cast<std::size_t>(g.crs() * g.p()));
        std::vector<float> dcol(static_cast<std::size_t>(need_x ? g.crs() * g.p() : 0));
#ifdef _OPENMP
        const int t = omp_get_thread_num();
#else
        const int t = 0;
#endif
#pragma omp for schedule(static)
        for (std::int64_t n = 0; n < g.n; ++n) {
          ConstMatMap dY(dy + n * g.k * g.p(), g.k, g.p());
          if (need_w) {
            im2col(g, x.data() + n * g.c * g.h * g.w, col.data());
            dw_parts[static_cast<std::size_t>(t)].noalias() += dY * ConstMatMap(col.data(), g.crs(), g.p()).transpose();
          }
          if (need_x) {
            MatMap(dcol.data(), g.crs(), g.p()).noalias() = ConstMatMap(w.data(), g.k, g.crs()).transpose() * dY;
            col2imAdd(g, dcol.data(), gx.data + n * g.c * g.h * g.w);
          }
        }
      }
      Eigen::setNbThreads(0);
      if (need_x) gradWritten(x);
      if (need_w) {
        RowMajor dw = RowMajor::Zero(g.k, g.crs());
        for (const auto& part : dw_parts) dw += part;
        accumulateGrad(w, dw.data(), w.numel());
      }
    });
  }
  return y;
}

// ------------------------------------------------------------------ pooling

namespace {
struct PoolGeom {
  std::int64_t planes, h, w, k, stride, pad, oh, ow;
};

PoolGeom poolGeom(const Tensor& x, const Pool2dOptions& o, const char* op) {
  requireShape(x.ndim() == 4, op, "expects [N, C, H, W], got " + x.shape().str());
  // As torch: a window must overlap the input (a max-pool window of padding
  // only would have no arg-max).
  requireShape(o.kernel >= 1 && o.stride >= 0 && o.padding >= 0 && o.padding <= o.kernel / 2, op,
               fmt::format("kernel {}, stride {}, padding {}: expected kernel >= 1, stride >= 0 and padding at most "
                           "half the kernel",
                           o.kernel, o.stride, o.padding));
  PoolGeom g{x.size(0) * x.size(1), x.size(2), x.size(3), o.kernel, o.stride ? o.stride : o.kernel, o.padding, 0, 0};
  requireShape(g.h + 2 * g.pad >= g.k && g.w + 2 * g.pad >= g.k, op, "window larger than the padded input");
  g.oh = (g.h + 2 * g.pad - g.k) / g.stride + 1;
  g.ow = (g.w + 2 * g.pad - g.k) / g.stride + 1;
  return g;
}
}  // namespace

Tensor maxPool2d(const Tensor& x, const Pool2dOptions& o) {
  const PoolGeom g = poolGeom(x, o, "max_pool2d");
  recordOp<1>("max_pool2d", {&x});
  Tensor y = like(x, {x.size(0), x.size(1), g.oh, g.ow});
  auto argmax = std::make_shared<std::vector<std::int32_t>>(static_cast<std::size_t>(y.numel()));
  const float* xp = x.data();
  float* yp = y.data();
#pragma omp parallel for if (g.planes > 8)
  for (std::int64_t p = 0; p < g.planes; ++p)
    for (std::int64_t oy = 0; oy < g.oh; ++oy)
      for (std::int64_t ox = 0; ox < g.ow; ++ox) {
        float best = -std::numeric_limits<float>::infinity();
        std::int32_t at = -1;
        for (std::int64_t i = 0; i < g.k; ++i) {
          const std::int64_t iy = oy * g.stride + i - g.pad;
          if (iy < 0 || iy >= g.h) continue;
          for (std::int64_t j = 0; j < g.k; ++j) {
            const std::int64_t ix = ox * g.stride + j - g.pad;
            if (ix < 0 || ix >= g.w) continue;
            const float v = xp[(p * g.h + iy) * g.w + ix];
            if (v > best || at < 0 || std::isnan(v)) {
              best = v;
              at = static_cast<std::int32_t>(iy * g.w + ix);
            }
          }
        }
        const std::int64_t oi = (p * g.oh + oy) * g.ow + ox;
        yp[oi] = best;
        (*argmax)[static_cast<std::size_t>(oi)] = at;
      }
  if (autograd::needsGrad({&x})) {
    track(y, {&x});
    autograd::currentTape()->record([x, y, g, argmax] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      GradTarget gx = gradTarget(x);
      if (!gx.accumulate) std::fill(gx.data, gx.data + x.numel(), 0.0f);
      const float* dy = gy.data();
#pragma omp parallel for if (g.planes > 8)
      for (std::int64_t p = 0; p < g.planes; ++p)
        for (std::int64_t i = 0; i < g.oh * g.ow; ++i)
          gx.data[p * g.h * g.w + (*argmax)[static_cast<std::size_t>(p * g.oh * g.ow + i)]] += dy[p * g.oh * g.ow + i];
      gradWritten(x);
    });
  }
  return y;
}

Tensor avgPool2d(const Tensor& x, const Pool2dOptions& o) {
  const PoolGeom g = poolGeom(x, o, "avg_pool2d");
  recordOp<1>("avg_pool2d", {&x});
  Tensor y = like(x, {x.size(0), x.size(1), g.oh, g.ow});
  const float inv = 1.0f / static_cast<float>(g.k * g.k);  // count_include_pad=True, as torch's default
  const float* xp = x.data();
  float* yp = y.data();
#pragma omp parallel for if (g.planes > 8)
  for (std::int64_t p = 0; p < g.planes; ++p)
    for (std::int64_t oy = 0; oy < g.oh; ++oy)
      for (std::int64_t ox = 0; ox < g.ow; ++ox) {
        float s = 0;
        for (std::int64_t i = 0; i < g.k; ++i)
          for (std::int64_t j = 0; j < g.k; ++j) {
            const std::int64_t iy = oy * g.stride + i - g.pad, ix = ox * g.stride + j - g.pad;
            if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) s += xp[(p * g.h + iy) * g.w + ix];
          }
        yp[(p * g.oh + oy) * g.ow + ox] = s * inv;
      }
  if (autograd::needsGrad({&x})) {
    track(y, {&x});
    autograd::currentTape()->record([x, y, g, inv] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      GradTarget gx = gradTarget(x);
      if (!gx.accumulate) std::fill(gx.data, gx.data + x.numel(), 0.0f);
      const float* dy = gy.data();
#pragma omp parallel for if (g.planes > 8)
      for (std::int64_t p = 0; p < g.planes; ++p)
        for (std::int64_t oy = 0; oy < g.oh; ++oy)
          for (std::int64_t ox = 0; ox < g.ow; ++ox) {
            const float d = dy[(p * g.oh + oy) * g.ow + ox] * inv;
            for (std::int64_t i = 0; i < g.k; ++i)
              for (std::int64_t j = 0; j < g.k; ++j) {
                const std::int64_t iy = oy * g.stride + i - g.pad, ix = ox * g.stride + j - g.pad;
                if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) gx.data[(p * g.h + iy) * g.w + ix] += d;
              }
          }
      gradWritten(x);
    });
  }
  return y;
}

// ------------------------------------------------------------------ activations

Tensor relu(const Tensor& x) {
  return unary(
      "relu", x, [](float v) { return v > 0.0f ? v : 0.0f; }, [](float, float y) { return y > 0.0f ? 1.0f : 0.0f; });
}

Tensor gelu(const Tensor& x, bool approximate) {
  if (approximate) {
    constexpr float kA = 0.7978845608028654f;  // sqrt(2/pi)
    return unary(
        "gelu_tanh", x,
        [](float v) { return 0.5f * v * (1.0f + std::tanh(kA * (v + 0.044715f * v * v * v))); },
        [](float v, float) {
          const float u = kA * (v + 0.044715f * v * v * v);
          const float t = std::tanh(u);
          return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kA * (1.0f + 3.0f * 0.044715f * v * v);
        });
  }
  return unary(
      "gelu", x, [](float v) { return 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f)); },
      [](float v, float) {
        return 0.5f * (1.0f + std::erf(v * 0.7071067811865476f)) + v * 0.3989422804014327f * std::exp(-0.5f * v * v);
      });
}

Tensor tanh(const Tensor& x) {
  return unary(
      "tanh", x, [](float v) { return std::tanh(v); }, [](float, float y) { return 1.0f - y * y; });
}

Tensor sigmoid(const Tensor& x) {
  return unary(
      "sigmoid", x, [](float v) { return 1.0f / (1.0f + std::exp(-v)); }, [](float, float y) { return y * (1.0f - y); });
}

Tensor dropout(const Tensor& x, float p, bool training, Generator& rng) {
  if (!training || p == 0.0f) return x;
  recordOp<1>("dropout", {&x});
  const std::int64_t n = x.numel();
  auto mask = std::make_shared<std::vector<float>>(static_cast<std::size_t>(n));
  const float keep_scale = 1.0f / (1.0f - p);
  for (float& m : *mask) m = rng.uniform() < p ? 0.0f : keep_scale;
  Tensor y = like(x, x.shape());
  const float* xp = x.data();
  float* yp = y.data();
  for (std::int64_t i = 0; i < n; ++i) yp[i] = xp[i] * (*mask)[static_cast<std::size_t>(i)];
  if (autograd::needsGrad({&x})) {
    track(y, {&x});
    autograd::currentTape()->record([x, y, n, mask] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      GradTarget g = gradTarget(x);
      const float* dy = gy.data();
      for (std::int64_t i = 0; i < n; ++i) {
        const float d = dy[i] * (*mask)[static_cast<std::size_t>(i)];
        g.data[i] = g.accumulate ? g.data[i] + d : d;
      }
      gradWritten(x);
    });
  }
  return y;
}

// ------------------------------------------------------------------ shapes

Tensor reshape(const Tensor& x, const Shape& shape) {
  requireShape(shape.numel() == x.numel(), "reshape", fmt::format("{} to {}", x.shape().str(), shape.str()));
  Tensor y = x.reshaped(shape);
  if (autograd::needsGrad({&x})) {
    track(y, {&x});
    autograd::currentTape()->record([x, y] {
      Tensor gy = y.grad();
      if (gy.defined()) accumulateGrad(x, gy.data(), x.numel());
    });
  }
  return y;
}

Tensor flatten(const Tensor& x, int start_dim) {
  std::vector<std::int64_t> dims;
  for (int i = 0; i < start_dim; ++i) dims.push_back(x.size(i));
  dims.push_back(x.shape().tail(start_dim));
  return reshape(x, Shape(std::span<const std::int64_t>(dims)));
}

// ------------------------------------------------------------------ normalisation

Tensor layerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps) {
  const std::int64_t d = x.size(-1), rows = x.numel() / d;
  recordOp<3>("layer_norm", {&x, &weight, &bias});
  Tensor y = like(x, x.shape());
  auto stats = std::make_shared<std::vector<float>>(static_cast<std::size_t>(2 * rows));  // mean, rstd
  const float* xp = x.data();
  float* yp = y.data();
#pragma omp parallel for if (rows > 64)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * d;
    double mean = 0, var = 0;
    for (std::int64_t i = 0; i < d; ++i) mean += xr[i];
    mean /= static_cast<double>(d);
    for (std::int64_t i = 0; i < d; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(d);
    const auto m = static_cast<float>(mean);
    const auto rstd = static_cast<float>(1.0 / std::sqrt(var + eps));
    (*stats)[static_cast<std::size_t>(2 * r)] = m;
    (*stats)[static_cast<std::size_t>(2 * r + 1)] = rstd;
    for (std::int64_t i = 0; i < d; ++i) {
      float v = (xr[i] - m) * rstd;
      if (weight.defined()) v *= weight.data()[i];
      if (bias.defined()) v += bias.data()[i];
      yp[r * d + i] = v;
    }
  }
  if (autograd::needsGrad({&x, &weight, &bias})) {
    track(y, {&x, &weight, &bias});
    autograd::currentTape()->record([x, weight, bias, y, stats, rows, d] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      const float* dy = gy.data();
      const float* xp = x.data();
      std::vector<float> dw(static_cast<std::size_t>(d), 0.0f), db(static_cast<std::size_t>(d), 0.0f);
      GradTarget gx{nullptr, false};
      if (x.requiresGrad()) gx = gradTarget(x);
      for (std::int64_t r = 0; r < rows; ++r) {
        const float m = (*stats)[static_cast<std::size_t>(2 * r)], rstd = (*stats)[static_cast<std::size_t>(2 * r + 1)];
        double sum_g = 0, sum_gx = 0;
        for (std::int64_t i = 0; i < d; ++i) {
          const float xhat = (xp[r * d + i] - m) * rstd;
          const float g = dy[r * d + i] * (weight.defined() ? weight.data()[i] : 1.0f);
          dw[static_cast<std::size_t>(i)] += dy[r * d + i] * xhat;
          db[static_cast<std::size_t>(i)] += dy[r * d + i];
          sum_g += g;
          sum_gx += static_cast<double>(g) * xhat;
        }
        if (!gx.data) continue;
        const auto mg = static_cast<float>(sum_g / static_cast<double>(d));
        const auto mgx = static_cast<float>(sum_gx / static_cast<double>(d));
        for (std::int64_t i = 0; i < d; ++i) {
          const float xhat = (xp[r * d + i] - m) * rstd;
          const float g = dy[r * d + i] * (weight.defined() ? weight.data()[i] : 1.0f);
          const float v = rstd * (g - mg - xhat * mgx);
          gx.data[r * d + i] = gx.accumulate ? gx.data[r * d + i] + v : v;
        }
      }
      if (gx.data) gradWritten(x);
      if (weight.defined() && weight.requiresGrad()) accumulateGrad(weight, dw.data(), d);
      if (bias.defined() && bias.requiresGrad()) accumulateGrad(bias, db.data(), d);
    });
  }
  return y;
}

Tensor batchNorm2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor& running_mean,
                   Tensor& running_var, bool training, float momentum, float eps) {
  requireShape(x.ndim() == 4, "batch_norm2d", "expects [N, C, H, W], got " + x.shape().str());
  const std::int64_t n = x.size(0), c = x.size(1), hw = x.size(2) * x.size(3);
  recordOp<3>("batch_norm", {&x, &weight, &bias});
  Tensor y = like(x, x.shape());
  auto stats = std::make_shared<std::vector<float>>(static_cast<std::size_t>(2 * c));  // mean, rstd
  const float* xp = x.data();
  float* yp = y.data();
  const auto count = static_cast<double>(n * hw);
  for (std::int64_t ch = 0; ch < c; ++ch) {
    float m, var;
    if (training) {
      double s = 0, sq = 0;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < hw; ++j) s += xp[(i * c + ch) * hw + j];
      const double mean = s / count;
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < hw; ++j) {
          const double dlt = xp[(i * c + ch) * hw + j] - mean;
          sq += dlt * dlt;
        }
      m = static_cast<float>(mean);
      var = static_cast<float>(sq / count);
      const float unbiased = count > 1 ? static_cast<float>(sq / (count - 1)) : var;
      running_mean.data()[ch] = (1 - momentum) * running_mean.data()[ch] + momentum * m;
      running_var.data()[ch] = (1 - momentum) * running_var.data()[ch] + momentum * unbiased;
    } else {
      m = running_mean.data()[ch];
      var = running_var.data()[ch];
    }
    const float rstd = 1.0f / std::sqrt(var + eps);
    (*stats)[static_cast<std::size_t>(2 * ch)] = m;
    (*stats)[static_cast<std::size_t>(2 * ch + 1)] = rstd;
    const float w = weight.defined() ? weight.data()[ch] : 1.0f, b = bias.defined() ? bias.data()[ch] : 0.0f;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < hw; ++j) {
        const std::int64_t at = (i * c + ch) * hw + j;
        yp[at] = (xp[at] - m) * rstd * w + b;
      }
  }
  if (autograd::needsGrad({&x, &weight, &bias})) {
    track(y, {&x, &weight, &bias});
    autograd::currentTape()->record([x, weight, bias, y, stats, n, c, hw, training] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      const float* dy = gy.data();
      const float* xp = x.data();
      const auto count = static_cast<double>(n * hw);
      std::vector<float> dw(static_cast<std::size_t>(c)), db(static_cast<std::size_t>(c));
      GradTarget gx{nullptr, false};
      if (x.requiresGrad()) gx = gradTarget(x);
      for (std::int64_t ch = 0; ch < c; ++ch) {
        const float m = (*stats)[static_cast<std::size_t>(2 * ch)], rstd = (*stats)[static_cast<std::size_t>(2 * ch + 1)];
        double sum_dy = 0, sum_dy_xhat = 0;
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < hw; ++j) {
            const std::int64_t at = (i * c + ch) * hw + j;
            sum_dy += dy[at];
            sum_dy_xhat += static_cast<double>(dy[at]) * (xp[at] - m) * rstd;
          }
        dw[static_cast<std::size_t>(ch)] = static_cast<float>(sum_dy_xhat);
        db[static_cast<std::size_t>(ch)] = static_cast<float>(sum_dy);
        if (!gx.data) continue;
        const float w = weight.defined() ? weight.data()[ch] : 1.0f;
        const auto mdy = static_cast<float>(sum_dy / count), mdyx = static_cast<float>(sum_dy_xhat / count);
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < hw; ++j) {
            const std::int64_t at = (i * c + ch) * hw + j;
            const float xhat = (xp[at] - m) * rstd;
            const float v = training ? w * rstd * (dy[at] - mdy - xhat * mdyx) : w * rstd * dy[at];
            gx.data[at] = gx.accumulate ? gx.data[at] + v : v;
          }
      }
      if (gx.data) gradWritten(x);
      if (weight.defined() && weight.requiresGrad()) accumulateGrad(weight, dw.data(), c);
      if (bias.defined() && bias.requiresGrad()) accumulateGrad(bias, db.data(), c);
    });
  }
  return y;
}

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  requireShape(indices.dtype() == DType::kInt64 && weight.ndim() == 2, "embedding",
               "expects int64 indices and a [num, dim] weight");
  recordOp<2>("embedding", {&indices, &weight});
  const std::int64_t num = weight.size(0), dim = weight.size(1), n = indices.numel();
  std::vector<std::int64_t> dims(indices.shape().dims().begin(), indices.shape().dims().end());
  dims.push_back(dim);
  Tensor y = like(weight, Shape(std::span<const std::int64_t>(dims)));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t row = indices.labels()[i];
    if (row < 0 || row >= num)
      throw Error(fmt::format("embedding: index {} out of range for {} embeddings", row, num));
    std::copy(weight.data() + row * dim, weight.data() + (row + 1) * dim, y.data() + i * dim);
  }
  if (autograd::needsGrad({&weight})) {
    track(y, {&weight});
    autograd::currentTape()->record([indices, weight, y, n, dim] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      GradTarget g = gradTarget(weight);
      if (!g.accumulate) std::fill(g.data, g.data + weight.numel(), 0.0f);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t row = indices.labels()[i];
        for (std::int64_t j = 0; j < dim; ++j) g.data[row * dim + j] += gy.data()[i * dim + j];
      }
      gradWritten(weight);
    });
  }
  return y;
}

// ------------------------------------------------------------------ losses

Tensor crossEntropy(const Tensor& logits, const Tensor& labels, float label_smoothing) {
  requireShape(logits.ndim() == 2 && labels.dtype() == DType::kInt64 && labels.numel() == logits.size(0), "cross_entropy",
               fmt::format("expects logits [N, C] and int64 labels [N], got {} and {}", logits.shape().str(),
                           labels.shape().str()));
  recordOp<2>("cross_entropy", {&logits, &labels});
  const std::int64_t n = logits.size(0), c = logits.size(1);
  auto probs = std::make_shared<std::vector<float>>(static_cast<std::size_t>(n * c));
  const float* lp = logits.data();
  const std::int64_t* yp = labels.labels();
  double total = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    const float* row = lp + r * c;
    const std::int64_t label = yp[r];
    if (label < 0 || label >= c)
      throw Error(fmt::format("cross_entropy: label {} of sample {} is outside the {} classes", label, r, c));
    const float mx = *std::max_element(row, row + c);
    double sum = 0;
    for (std::int64_t j = 0; j < c; ++j) sum += std::exp(static_cast<double>(row[j] - mx));
    const double log_sum = std::log(sum);
    double smooth = 0;
    for (std::int64_t j = 0; j < c; ++j) {
      const double logp = row[j] - mx - log_sum;
      (*probs)[static_cast<std::size_t>(r * c + j)] = static_cast<float>(std::exp(logp));
      smooth -= logp;
    }
    const double nll = -(row[label] - mx - log_sum);
    total += (1.0 - label_smoothing) * nll + label_smoothing * smooth / static_cast<double>(c);
  }
  Tensor loss = Tensor::full(logits.device(), {1}, static_cast<float>(total / static_cast<double>(n))).reshaped(Shape{});
  if (autograd::needsGrad({&logits})) {
    track(loss, {&logits});
    autograd::currentTape()->record([logits, labels, loss, probs, n, c, label_smoothing] {
      Tensor gl = loss.grad();
      if (!gl.defined()) return;
      const float scale = gl.item() / static_cast<float>(n);
      GradTarget g = gradTarget(logits);
      const float off = label_smoothing / static_cast<float>(c);
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t j = 0; j < c; ++j) {
          const float target = (j == labels.labels()[r] ? 1.0f - label_smoothing : 0.0f) + off;
          const float d = ((*probs)[static_cast<std::size_t>(r * c + j)] - target) * scale;
          g.data[r * c + j] = g.accumulate ? g.data[r * c + j] + d : d;
        }
      gradWritten(logits);
    });
  }
  return loss;
}

Tensor mseLoss(const Tensor& prediction, const Tensor& target) {
  requireShape(prediction.shape() == target.shape(), "mse_loss",
               fmt::format("shapes {} and {} differ", prediction.shape().str(), target.shape().str()));
  recordOp<2>("mse_loss", {&prediction, &target});
  const std::int64_t n = prediction.numel();
  double total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = prediction.data()[i] - target.data()[i];
    total += d * d;
  }
  Tensor loss = Tensor::full(prediction.device(), {1}, static_cast<float>(total / static_cast<double>(n))).reshaped(Shape{});
  if (autograd::needsGrad({&prediction, &target})) {
    track(loss, {&prediction, &target});
    autograd::currentTape()->record([prediction, target, loss, n] {
      Tensor gl = loss.grad();
      if (!gl.defined()) return;
      const float scale = 2.0f * gl.item() / static_cast<float>(n);
      for (const Tensor* t : {&prediction, &target}) {
        if (!t->requiresGrad()) continue;
        const float sign = t == &prediction ? 1.0f : -1.0f;
        GradTarget g = gradTarget(*t);
        for (std::int64_t i = 0; i < n; ++i) {
          const float d = sign * scale * (prediction.data()[i] - target.data()[i]);
          g.data[i] = g.accumulate ? g.data[i] + d : d;
        }
        gradWritten(*t);
      }
    });
  }
  return loss;
}

// ------------------------------------------------------------------ elementwise

namespace {
// a (op) b elementwise, same shapes; da = dy * da_coef(a, b), db = dy * db_coef(a, b).
template <class F, class DA, class DB>
Tensor binary(device::OpName name, const Tensor& a, const Tensor& b, F f, DA da, DB db) {
  requireShape(a.shape() == b.shape(), "elementwise",
               fmt::format("shapes {} and {} differ (no broadcasting)", a.shape().str(), b.shape().str()));
  recordOp<2>(name, {&a, &b});
  const std::int64_t n = a.numel();
  Tensor y = like(a, a.shape());
  for (std::int64_t i = 0; i < n; ++i) y.data()[i] = f(a.data()[i], b.data()[i]);
  if (autograd::needsGrad({&a, &b})) {
    track(y, {&a, &b});
    autograd::currentTape()->record([a, b, y, n, da, db] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      for (int which = 0; which < 2; ++which) {
        const Tensor& t = which == 0 ? a : b;
        if (!t.requiresGrad()) continue;
        GradTarget g = gradTarget(t);
        for (std::int64_t i = 0; i < n; ++i) {
          const float coef = which == 0 ? da(a.data()[i], b.data()[i]) : db(a.data()[i], b.data()[i]);
          const float d = gy.data()[i] * coef;
          g.data[i] = g.accumulate ? g.data[i] + d : d;
        }
        gradWritten(t);
      }
    });
  }
  return y;
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(
      "add", a, b, [](float x, float y) { return x + y; }, [](float, float) { return 1.0f; },
      [](float, float) { return 1.0f; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary(
      "sub", a, b, [](float x, float y) { return x - y; }, [](float, float) { return 1.0f; },
      [](float, float) { return -1.0f; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(
      "mul", a, b, [](float x, float y) { return x * y; }, [](float, float y) { return y; },
      [](float x, float) { return x; });
}

Tensor scale(const Tensor& a, float s) {
  return unary(
      "scale", a, [s](float v) { return v * s; }, [s](float, float) { return s; });
}

Tensor sum(const Tensor& a) {
  recordOp<1>("sum", {&a});
  double total = 0;
  for (float v : a.values()) total += v;
  Tensor y = Tensor::full(a.device(), {1}, static_cast<float>(total)).reshaped(Shape{});
  if (autograd::needsGrad({&a})) {
    track(y, {&a});
    autograd::currentTape()->record([a, y] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      const float d = gy.item();
      GradTarget g = gradTarget(a);
      for (std::int64_t i = 0; i < a.numel(); ++i) g.data[i] = g.accumulate ? g.data[i] + d : d;
      gradWritten(a);
    });
  }
  return y;
}

Tensor mean(const Tensor& a) { return scale(sum(a), 1.0f / static_cast<float>(a.numel())); }

Tensor softmax(const Tensor& logits) {
  const std::int64_t c = logits.size(-1), rows = logits.numel() / c;
  recordOp<1>("softmax", {&logits});
  Tensor y = like(logits, logits.shape());
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * c;
    float* out = y.data() + r * c;
    const float mx = *std::max_element(row, row + c);
    double s = 0;
    for (std::int64_t j = 0; j < c; ++j) s += (out[j] = std::exp(row[j] - mx));
    for (std::int64_t j = 0; j < c; ++j) out[j] = static_cast<float>(out[j] / s);
  }
  if (autograd::needsGrad({&logits})) {
    track(y, {&logits});
    autograd::currentTape()->record([logits, y, rows, c] {
      Tensor gy = y.grad();
      if (!gy.defined()) return;
      GradTarget g = gradTarget(logits);
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* p = y.data() + r * c;
        const float* dy = gy.data() + r * c;
        double dot = 0;
        for (std::int64_t j = 0; j < c; ++j) dot += static_cast<double>(p[j]) * dy[j];
        for (std::int64_t j = 0; j < c; ++j) {
          const float d = p[j] * (dy[j] - static_cast<float>(dot));
          g.data[r * c + j] = g.accumulate ? g.data[r * c + j] + d : d;
        }
      }
      gradWritten(logits);
    });
  }
  return y;
}

std::int64_t countCorrect(const Tensor& logits, const Tensor& labels) {
  const std::int64_t n = logits.size(0), c = logits.numel() / n;
  std::int64_t correct = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    const float* row = logits.data() + r * c;
    correct += (std::max_element(row, row + c) - row) == labels.labels()[r];
  }
  return correct;
}

}  // namespace hpu::core::ops
