#include "hpu/device/kernels/norm.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "hpu/device/threading.h"
#include "hpu/device/vector_clones.h"
#include "lane_sum.h"

namespace hpu::device::kernels {
namespace {

using detail::laneSum;

// Rows per task of a norm's backward pass. Each task sums its rows' weight
// (and bias) gradients in double; the tasks' sums are then added in task
// order, so the result depends on this constant, not on the thread count.
constexpr std::int64_t kRowsPerTask = 32;

// Runs rows(begin, end, sums) over tasks of kRowsPerTask rows, on the team
// when that pays; sums[t] holds task t's `width` doubles (zeroed), and the
// result of every task's are their sum, added in task order.
template <class Rows>
std::vector<double> rowTasks(ParallelSite& site, std::int64_t rows, std::int64_t d, std::size_t width,
                             const Rows& body) {
  const std::int64_t tasks = (rows + kRowsPerTask - 1) / kRowsPerTask;
  std::vector<double> sums(static_cast<std::size_t>(tasks) * width, 0.0);
  parallelTasks(site, tasks, static_cast<double>(rows * d), [&](std::int64_t t) {
    body(t * kRowsPerTask, std::min(rows, (t + 1) * kRowsPerTask), sums.data() + static_cast<std::size_t>(t) * width);
  });
  std::vector<double> total(width, 0.0);
  for (std::int64_t t = 0; t < tasks; ++t)
    for (std::size_t i = 0; i < width; ++i) total[i] += sums[static_cast<std::size_t>(t) * width + i];
  return total;
}

}  // namespace

void layerNormForward(const float* x, std::int64_t rows, std::int64_t d, const float* w, const float* b, float eps,
                      float* y, float* mean_rstd) {
  static ParallelSite site("layer norm forward");
  parallelFor(site, rows, 1, static_cast<double>(rows * d), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * d;
      const double mean = laneSum<double, 8>(d, [&](std::int64_t i) { return static_cast<double>(xr[i]); }) /
                          static_cast<double>(d);
      const double var = laneSum<double, 8>(d, [&](std::int64_t i) { return (xr[i] - mean) * (xr[i] - mean); }) /
                         static_cast<double>(d);
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
  static ParallelSite site("layer norm backward");
  const auto ud = static_cast<std::size_t>(d);
  const std::vector<double> g = rowTasks(site, rows, d, 2 * ud, [&](std::int64_t begin, std::int64_t end, double* gwb) {
    double* gw = gwb;
    double* gb = gwb + ud;
    for (std::int64_t r = begin; r < end; ++r) {
      const float m = mean_rstd[2 * r], rstd = mean_rstd[2 * r + 1];
      double sum_g = 0, sum_gx = 0;
      for (std::int64_t i = 0; i < d; ++i) {
        const float xhat = (x[r * d + i] - m) * rstd;
        const float gi = dy[r * d + i] * (w != nullptr ? w[i] : 1.0f);
        gw[i] += static_cast<double>(dy[r * d + i]) * xhat;
        gb[i] += dy[r * d + i];
        sum_g += gi;
        sum_gx += static_cast<double>(gi) * xhat;
      }
      if (dx == nullptr) continue;
      const auto mg = static_cast<float>(sum_g / static_cast<double>(d));
      const auto mgx = static_cast<float>(sum_gx / static_cast<double>(d));
      for (std::int64_t i = 0; i < d; ++i) {
        const float xhat = (x[r * d + i] - m) * rstd;
        const float gi = dy[r * d + i] * (w != nullptr ? w[i] : 1.0f);
        const float v = rstd * (gi - mg - xhat * mgx);
        dx[r * d + i] = accumulate_dx ? dx[r * d + i] + v : v;
      }
    }
  });
  for (std::int64_t i = 0; i < d; ++i) {
    const auto u = static_cast<std::size_t>(i);
    if (dw != nullptr) dw[i] = (accumulate_params ? dw[i] : 0.0f) + static_cast<float>(g[u]);
    if (db != nullptr) db[i] = (accumulate_params ? db[i] : 0.0f) + static_cast<float>(g[ud + u]);
  }
}

void rmsNormForward(const float* x, std::int64_t rows, std::int64_t d, const float* w, float eps, float* y,
                    float* rstd) {
  static ParallelSite site("rms norm forward");
  parallelFor(site, rows, 1, static_cast<double>(rows * d), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * d;
      const double sq = laneSum<double, 8>(d, [&](std::int64_t i) { return static_cast<double>(xr[i]) * xr[i]; });
      const float inv = 1.0f / std::sqrt(static_cast<float>(sq / static_cast<double>(d)) + eps);
      rstd[r] = inv;
      float* __restrict yr = y + r * d;
      onVectorLevel([&]() HPU_LOOP_BODY {
        if (w != nullptr)
          for (std::int64_t i = 0; i < d; ++i) yr[i] = w[i] * (xr[i] * inv);
        else
          for (std::int64_t i = 0; i < d; ++i) yr[i] = xr[i] * inv;
      });
    }
  });
}

void rmsNormBackward(const float* x, const float* dy, std::int64_t rows, std::int64_t d, const float* w,
                     const float* rstd, float* dx, bool accumulate_dx, float* dw, bool accumulate_dw) {
  static ParallelSite site("rms norm backward");
  const std::vector<double> gw =
      rowTasks(site, rows, d, static_cast<std::size_t>(d), [&](std::int64_t begin, std::int64_t end, double* gwt) {
        for (std::int64_t r = begin; r < end; ++r) {
          const float* xr = x + r * d;
          const float* gr = dy + r * d;
          const float inv = rstd[r];
          // The mean over the row of g * xhat, g = dy * w.
          const double dot =
              w != nullptr
                  ? laneSum<double, 8>(d, [&](std::int64_t i) { return static_cast<double>(gr[i] * w[i]) * (xr[i] * inv); })
                  : laneSum<double, 8>(d, [&](std::int64_t i) { return static_cast<double>(gr[i]) * (xr[i] * inv); });
          const auto mean = static_cast<float>(dot / static_cast<double>(d));
          // Each element on its own: one loop per output, free of branches
          // (g = dy when there is no weight: dy * 1 is dy).
          onVectorLevel([&]() HPU_LOOP_BODY {
            float* __restrict dxr = dx != nullptr ? dx + r * d : nullptr;
            if (dxr != nullptr && w != nullptr && accumulate_dx)
              for (std::int64_t i = 0; i < d; ++i) dxr[i] += inv * (gr[i] * w[i] - (xr[i] * inv) * mean);
            else if (dxr != nullptr && w != nullptr)
              for (std::int64_t i = 0; i < d; ++i) dxr[i] = inv * (gr[i] * w[i] - (xr[i] * inv) * mean);
            else if (dxr != nullptr && accumulate_dx)
              for (std::int64_t i = 0; i < d; ++i) dxr[i] += inv * (gr[i] - (xr[i] * inv) * mean);
            else if (dxr != nullptr)
              for (std::int64_t i = 0; i < d; ++i) dxr[i] = inv * (gr[i] - (xr[i] * inv) * mean);
            if (dw != nullptr)
              for (std::int64_t i = 0; i < d; ++i) gwt[i] += static_cast<double>(gr[i]) * (xr[i] * inv);
          });
        }
      });
  for (std::int64_t i = 0; i < (dw != nullptr ? d : 0); ++i)
    dw[i] = (accumulate_dw ? dw[i] : 0.0f) + static_cast<float>(gw[static_cast<std::size_t>(i)]);
}

namespace {

// The per-channel passes of batch norm over x [N, C, HW].
struct ChannelPasses {
  const BatchNormShape& g;
  std::int64_t at(std::int64_t i, std::int64_t ch, std::int64_t j) const { return (i * g.c + ch) * g.hw + j; }

  double sum(const float* x, std::int64_t ch) const {
    double s = 0;
    for (std::int64_t i = 0; i < g.n; ++i)
      for (std::int64_t j = 0; j < g.hw; ++j) s += x[at(i, ch, j)];
    return s;
  }
  double squaredDeviations(const float* x, std::int64_t ch, double mean) const {
    double sq = 0;
    for (std::int64_t i = 0; i < g.n; ++i)
      for (std::int64_t j = 0; j < g.hw; ++j) {
        const double dlt = x[at(i, ch, j)] - mean;
        sq += dlt * dlt;
      }
    return sq;
  }
  // Training's statistics of channel `ch` (`count` values): the running
  // ones updated (unbiased variance), the biased variance returned.
  static float batchVariance(double mean, double sq, double count, float momentum, float* running_mean,
                             float* running_var, std::int64_t ch) {
    const auto var = static_cast<float>(sq / count);
    const float unbiased = count > 1 ? static_cast<float>(sq / (count - 1)) : var;
    running_mean[ch] = (1 - momentum) * running_mean[ch] + momentum * static_cast<float>(mean);
    running_var[ch] = (1 - momentum) * running_var[ch] + momentum * unbiased;
    return var;
  }
  void normalize(const float* x, const float* w, const float* b, std::int64_t ch, float m, float var, float eps,
                 float* y, float* mean_rstd) const {
    const float rstd = 1.0f / std::sqrt(var + eps);
    mean_rstd[2 * ch] = m;
    mean_rstd[2 * ch + 1] = rstd;
    const float wc = w != nullptr ? w[ch] : 1.0f, bc = b != nullptr ? b[ch] : 0.0f;
    for (std::int64_t i = 0; i < g.n; ++i)
      for (std::int64_t j = 0; j < g.hw; ++j) y[at(i, ch, j)] = (x[at(i, ch, j)] - m) * rstd * wc + bc;
  }
  // (sum dy, sum dy * xhat) of channel `ch`; dw, db (+)= them.
  std::pair<double, double> gradSums(const float* x, const float* dy, const float* mean_rstd, std::int64_t ch,
                                     float* dw, float* db, bool accumulate_params) const {
    const float m = mean_rstd[2 * ch], rstd = mean_rstd[2 * ch + 1];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (std::int64_t i = 0; i < g.n; ++i)
      for (std::int64_t j = 0; j < g.hw; ++j) {
        sum_dy += dy[at(i, ch, j)];
        sum_dy_xhat += static_cast<double>(dy[at(i, ch, j)]) * (x[at(i, ch, j)] - m) * rstd;
      }
    if (dw != nullptr) dw[ch] = (accumulate_params ? dw[ch] : 0.0f) + static_cast<float>(sum_dy_xhat);
    if (db != nullptr) db[ch] = (accumulate_params ? db[ch] : 0.0f) + static_cast<float>(sum_dy);
    return {sum_dy, sum_dy_xhat};
  }
  void inputGrad(const float* x, const float* dy, const float* w, const float* mean_rstd, bool training,
                 std::int64_t ch, double sum_dy, double sum_dy_xhat, double count, float* dx, bool accumulate_dx) const {
    const float m = mean_rstd[2 * ch], rstd = mean_rstd[2 * ch + 1];
    const float wc = w != nullptr ? w[ch] : 1.0f;
    const auto mdy = static_cast<float>(sum_dy / count), mdyx = static_cast<float>(sum_dy_xhat / count);
    for (std::int64_t i = 0; i < g.n; ++i)
      for (std::int64_t j = 0; j < g.hw; ++j) {
        const std::int64_t k = at(i, ch, j);
        const float xhat = (x[k] - m) * rstd;
        const float v = training ? wc * rstd * (dy[k] - mdy - xhat * mdyx) : wc * rstd * dy[k];
        dx[k] = accumulate_dx ? dx[k] + v : v;
      }
  }
};

}  // namespace

void batchNorm2dForward(const BatchNormShape& g, const float* x, const float* w, const float* b, float* running_mean,
                        float* running_var, bool training, float momentum, float eps, float* y, float* mean_rstd,
                        const ChannelSums& sums) {
  const ChannelPasses p{g};
  if (!training) {
    for (std::int64_t ch = 0; ch < g.c; ++ch) p.normalize(x, w, b, ch, running_mean[ch], running_var[ch], eps, y, mean_rstd);
    return;
  }
  double count = static_cast<double>(g.n * g.hw);
  if (!sums) {  // channel by channel, while its values are in cache
    for (std::int64_t ch = 0; ch < g.c; ++ch) {
      const double mean = p.sum(x, ch) / count;
      const float var = ChannelPasses::batchVariance(mean, p.squaredDeviations(x, ch, mean), count, momentum,
                                                     running_mean, running_var, ch);
      p.normalize(x, w, b, ch, static_cast<float>(mean), var, eps, y, mean_rstd);
    }
    return;
  }
  // Synchronised: every channel's sums (then its squared deviations from the
  // global mean) summed across replicas, with the count.
  std::vector<double> stats(static_cast<std::size_t>(g.c) + 1);
  for (std::int64_t ch = 0; ch < g.c; ++ch) stats[static_cast<std::size_t>(ch)] = p.sum(x, ch);
  stats.back() = count;
  sums(stats);
  count = stats.back();
  std::vector<double> mean(static_cast<std::size_t>(g.c));
  for (std::int64_t ch = 0; ch < g.c; ++ch) {
    mean[static_cast<std::size_t>(ch)] = stats[static_cast<std::size_t>(ch)] / count;
    stats[static_cast<std::size_t>(ch)] = p.squaredDeviations(x, ch, mean[static_cast<std::size_t>(ch)]);
  }
  stats.back() = 0;
  sums(stats);
  for (std::int64_t ch = 0; ch < g.c; ++ch) {
    const double m = mean[static_cast<std::size_t>(ch)];
    const float var = ChannelPasses::batchVariance(m, stats[static_cast<std::size_t>(ch)], count, momentum,
                                                   running_mean, running_var, ch);
    p.normalize(x, w, b, ch, static_cast<float>(m), var, eps, y, mean_rstd);
  }
}

void batchNorm2dBackward(const BatchNormShape& g, const float* x, const float* dy, const float* w,
                         const float* mean_rstd, bool training, float* dx, bool accumulate_dx, float* dw, float* db,
                         bool accumulate_params, const ChannelSums& sums) {
  const ChannelPasses p{g};
  const auto count = static_cast<double>(g.n * g.hw);
  if (!training || !sums) {
    for (std::int64_t ch = 0; ch < g.c; ++ch) {
      const auto [sum_dy, sum_dy_xhat] = p.gradSums(x, dy, mean_rstd, ch, dw, db, accumulate_params);
      if (dx != nullptr) p.inputGrad(x, dy, w, mean_rstd, training, ch, sum_dy, sum_dy_xhat, count, dx, accumulate_dx);
    }
    return;
  }
  // Synchronised: dx sees every replica's (sum dy, sum dy * xhat); dw, db stay this batch's.
  std::vector<double> stats(2 * static_cast<std::size_t>(g.c) + 1);
  for (std::int64_t ch = 0; ch < g.c; ++ch)
    std::tie(stats[2 * static_cast<std::size_t>(ch)], stats[2 * static_cast<std::size_t>(ch) + 1]) =
        p.gradSums(x, dy, mean_rstd, ch, dw, db, accumulate_params);
  stats.back() = count;
  sums(stats);
  if (dx == nullptr) return;
  for (std::int64_t ch = 0; ch < g.c; ++ch)
    p.inputGrad(x, dy, w, mean_rstd, training, ch, stats[2 * static_cast<std::size_t>(ch)],
                stats[2 * static_cast<std::size_t>(ch) + 1], stats.back(), dx, accumulate_dx);
}

}  // namespace hpu::device::kernels
