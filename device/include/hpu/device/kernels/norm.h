// Layer normalisation over the last dimension and 2-D batch normalisation
// over (N, H, W) per channel, with the statistics backward needs. Rows run
// on the intra-op team; the weight and bias gradients of layer and RMS norm
// are summed per 32 rows in double, those sums added in order: the same
// bits on any number of threads.
#pragma once

#include <functional>
#include <span>

#include <cstdint>

namespace hpu::device::kernels {

// y = (x - mean) * rstd * w + b per row of x [rows, d]; w, b may be null.
// mean_rstd gets (mean, rstd) per row.
void layerNormForward(const float* x, std::int64_t rows, std::int64_t d, const float* w, const float* b, float eps,
                      float* y, float* mean_rstd);
// dx (+)= input gradient; dw, db (+)= parameter gradients (each may be null).
void layerNormBackward(const float* x, const float* dy, std::int64_t rows, std::int64_t d, const float* w,
                       const float* mean_rstd, float* dx, bool accumulate_dx, float* dw, float* db,
                       bool accumulate_params);

// RMS normalisation (Llama's RMSNorm): y = w * x * rstd per row of x
// [rows, d], rstd = 1 / sqrt(mean(x^2) + eps); w may be null. rstd gets one
// value per row.
void rmsNormForward(const float* x, std::int64_t rows, std::int64_t d, const float* w, float eps, float* y,
                    float* rstd);
// dx (+)= input gradient; dw (+)= weight gradient (each may be null).
void rmsNormBackward(const float* x, const float* dy, std::int64_t rows, std::int64_t d, const float* w,
                     const float* rstd, float* dx, bool accumulate_dx, float* dw, bool accumulate_dw);

struct BatchNormShape {
  std::int64_t n, c, hw;
};
// Sums per-channel statistics in place across the replicas of a
// synchronised batch norm (SyncBatchNorm); empty: this batch alone.
using ChannelSums = std::function<void(std::span<double>)>;
// Training: batch statistics normalise (biased variance) and update the
// running ones (momentum, unbiased variance, as torch). Evaluation: running
// statistics normalise. w, b may be null. mean_rstd gets (mean, rstd) per
// channel. With `sums`, the batch statistics are those of every replica's
// batch together (called twice, the same on every replica).
void batchNorm2dForward(const BatchNormShape& g, const float* x, const float* w, const float* b, float* running_mean,
                        float* running_var, bool training, float momentum, float eps, float* y, float* mean_rstd,
                        const ChannelSums& sums = {});
// dw, db are this batch's; with `sums`, dx accounts for the statistics
// being every replica's (called once).
void batchNorm2dBackward(const BatchNormShape& g, const float* x, const float* dy, const float* w,
                         const float* mean_rstd, bool training, float* dx, bool accumulate_dx, float* dw, float* db,
                         bool accumulate_params, const ChannelSums& sums = {});

}  // namespace hpu::device::kernels
