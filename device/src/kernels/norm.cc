#include "hpu/device/kernels/norm.h"

#include <cmath>
#include <vector>

#include "hpu/device/threading.h"

namespace hpu::device::kernels {

void layerNormForward(const float* x, std::int64_t rows, std::int64_t d, const float* w, const float* b, float eps,
                      float* y, float* mean_rstd) {
  static ParallelSite site("layer norm forward");
  parallelFor(site, rows, 1, static_cast<double>(rows * d), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * d;
      double mean = 0, var = 0;
      for (std::int64_t i = 0; i < d; ++i) mean += xr[i];
      mean /= static_cast<double>(d);
      for (std::int64_t i = 0; i < d; ++i) var += (xr[i] - mean) * (xr[i] - mean);
      var /= static_cast<double>(d);
      const auto m = static_cast<float>(mean);
      const auto rstd = static_cast<float>(1.0 / std::sqrt(var + eps));
      mean_rstd[2 * r] = m;
      mean_rstd[2 * r + 1] = rstd;
      for (std::int64_t i = 0; i < d; ++i) {
        const float v = (xr[i] - m) * rstd;
        y[r * d + i] = (w != nullptr ? v * w[i] : v) + (b != nullptr ? b[i] : 0.0f);
      }
    }
  });
}

void layerNormBackward(const float* x, const float* dy, std::int64_t rows, std::int64_t d, const float* w,
                       const float* mean_rstd, float* dx, bool accumulate_dx, float* dw, float* db,
                       bool accumulate_params) {
  std::vector<double> gw(static_cast<std::size_t>(d), 0.0), gb(static_cast<std::size_t>(d), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float m = mean_rstd[2 * r], rstd = mean_rstd[2 * r + 1];
    double sum_g = 0, sum_gx = 0;
    for (std::int64_t i = 0; i < d; ++i) {
      const float xhat = (x[r * d + i] - m) * rstd;
      const float g = dy[r * d + i] * (w != nullptr ? w[i] : 1.0f);
      gw[static_cast<std::size_t>(i)] += static_cast<double>(dy[r * d + i]) * xhat;
      gb[static_cast<std::size_t>(i)] += dy[r * d + i];
      sum_g += g;
      sum_gx += static_cast<double>(g) * xhat;
    }
    if (dx == nullptr) continue;
    const auto mg = static_cast<float>(sum_g / static_cast<double>(d));
    const auto mgx = static_cast<float>(sum_gx / static_cast<double>(d));
    for (std::int64_t i = 0; i < d; ++i) {
      const float xhat = (x[r * d + i] - m) * rstd;
      const float g = dy[r * d + i] * (w != nullptr ? w[i] : 1.0f);
      const float v = rstd * (g - mg - xhat * mgx);
      dx[r * d + i] = accumulate_dx ? dx[r * d + i] + v : v;
    }
  }
  for (std::int64_t i = 0; i < d; ++i) {
    if (dw != nullptr) dw[i] = (accumulate_params ? dw[i] : 0.0f) + static_cast<float>(gw[static_cast<std::size_t>(i)]);
    if (db != nullptr) db[i] = (accumulate_params ? db[i] : 0.0f) + static_cast<float>(gb[static_cast<std::size_t>(i)]);
  }
}

void rmsNormForward(const float* x, std::int64_t rows, std::int64_t d, const float* w, float eps, float* y,
                    float* rstd) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    double sq = 0;
    for (std::int64_t i = 0; i < d; ++i) sq += static_cast<double>(xr[i]) * xr[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(sq / static_cast<double>(d)) + eps);
    rstd[r] = inv;
    float* yr = y + r * d;
    for (std::int64_t i = 0; i < d; ++i) yr[i] = (w != nullptr ? w[i] : 1.0f) * (xr[i] * inv);
  }
}

void rmsNormBackward(const float* x, const float* dy, std::int64_t rows, std::int64_t d, const float* w,
                     const float* rstd, float* dx, bool accumulate_dx, float* dw, bool accumulate_dw) {
  std::vector<double> gw(static_cast<std::size_t>(dw != nullptr ? d : 0), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    const float* gr = dy + r * d;
    const float inv = rstd[r];
    double dot = 0;  // mean over the row of g * xhat, g = dy * w
    for (std::int64_t i = 0; i < d; ++i)
      dot += static_cast<double>(gr[i] * (w != nullptr ? w[i] : 1.0f)) * (xr[i] * inv);
    const auto mean = static_cast<float>(dot / static_cast<double>(d));
    for (std::int64_t i = 0; i < d; ++i) {
      const float xhat = xr[i] * inv;
      if (dx != nullptr) {
        const float v = inv * (gr[i] * (w != nullptr ? w[i] : 1.0f) - xhat * mean);
        dx[r * d + i] = accumulate_dx ? dx[r * d + i] + v : v;
      }
      if (dw != nullptr) gw[static_cast<std::size_t>(i)] += static_cast<double>(gr[i]) * xhat;
    }
  }
  for (std::int64_t i = 0; i < (dw != nullptr ? d : 0); ++i)
    dw[i] = (accumulate_dw ? dw[i] : 0.0f) + static_cast<float>(gw[static_cast<std::size_t>(i)]);
}

void batchNorm2dForward(const BatchNormShape& g, const float* x, const float* w, const float* b, float* running_mean,
                        float* running_var, bool training, float momentum, float eps, float* y, float* mean_rstd) {
  const auto count = static_cast<double>(g.n * g.hw);
  for (std::int64_t ch = 0; ch < g.c; ++ch) {
    float m, var;
    if (training) {
      double s = 0, sq = 0;
      for (std::int64_t i = 0; i < g.n; ++i)
        for (std::int64_t j = 0; j < g.hw; ++j) s += x[(i * g.c + ch) * g.hw + j];
      const double mean = s / count;
      for (std::int64_t i = 0; i < g.n; ++i)
        for (std::int64_t j = 0; j < g.hw; ++j) {
          const double dlt = x[(i * g.c + ch) * g.hw + j] - mean;
          sq += dlt * dlt;
        }
      m = static_cast<float>(mean);
      var = static_cast<float>(sq / count);
      const float unbiased = count > 1 ? static_cast<float>(sq / (count - 1)) : var;
      running_mean[ch] = (1 - momentum) * running_mean[ch] + momentum * m;
      running_var[ch] = (1 - momentum) * running_var[ch] + momentum * unbiased;
    } else {
      m = running_mean[ch];
      var = running_var[ch];
    }
    const float rstd = 1.0f / std::sqrt(var + eps);
    mean_rstd[2 * ch] = m;
    mean_rstd[2 * ch + 1] = rstd;
    const float wc = w != nullptr ? w[ch] : 1.0f, bc = b != nullptr ? b[ch] : 0.0f;
    for (std::int64_t i = 0; i < g.n; ++i)
      for (std::int64_t j = 0; j < g.hw; ++j) {
        const std::int64_t at = (i * g.c + ch) * g.hw + j;
        y[at] = (x[at] - m) * rstd * wc + bc;
      }
  }
}

void batchNorm2dBackward(const BatchNormShape& g, const float* x, const float* dy, const float* w,
                         const float* mean_rstd, bool training, float* dx, bool accumulate_dx, float* dw, float* db,
                         bool accumulate_params) {
  const auto count = static_cast<double>(g.n * g.hw);
  for (std::int64_t ch = 0; ch < g.c; ++ch) {
    const float m = mean_rstd[2 * ch], rstd = mean_rstd[2 * ch + 1];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (std::int64_t i = 0; i < g.n; ++i)
      for (std::int64_t j = 0; j < g.hw; ++j) {
        const std::int64_t at = (i * g.c + ch) * g.hw + j;
        sum_dy += dy[at];
        sum_dy_xhat += static_cast<double>(dy[at]) * (x[at] - m) * rstd;
      }
    if (dw != nullptr) dw[ch] = (accumulate_params ? dw[ch] : 0.0f) + static_cast<float>(sum_dy_xhat);
    if (db != nullptr) db[ch] = (accumulate_params ? db[ch] : 0.0f) + static_cast<float>(sum_dy);
    if (dx == nullptr) continue;
    const float wc = w != nullptr ? w[ch] : 1.0f;
    const auto mdy = static_cast<float>(sum_dy / count), mdyx = static_cast<float>(sum_dy_xhat / count);
    for (std::int64_t i = 0; i < g.n; ++i)
      for (std::int64_t j = 0; j < g.hw; ++j) {
        const std::int64_t at = (i * g.c + ch) * g.hw + j;
        const float xhat = (x[at] - m) * rstd;
        const float v = training ? wc * rstd * (dy[at] - mdy - xhat * mdyx) : wc * rstd * dy[at];
        dx[at] = accumulate_dx ? dx[at] + v : v;
      }
  }
}

}  // namespace hpu::device::kernels
