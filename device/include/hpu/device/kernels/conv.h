// 2-D convolution (NCHW input, [K, C, R, S] weights, groups 1, dilation 1),
// as GEMMs on the column matrix (im2col) of a chunk of images side by side;
// the packed kernels (AVX-512, AVX2) read the images and gradients in place
// instead of materialising their matrices. Chunks run on the intra-op
// threads, and the results are the same bits for any thread count. The
// input gradient of a stride-1 convolution with a square kernel is the
// "full" convolution of the output gradient with the flipped weights.
#pragma once

#include <cstdint>

namespace hpu::device::kernels {

struct Conv2dShape {
  std::int64_t n, c, h, w;  // input
  std::int64_t k, r, s;     // output channels, kernel height and width
  std::int64_t stride = 1, pad = 0;

  std::int64_t outH() const { return (h + 2 * pad - r) / stride + 1; }
  std::int64_t outW() const { return (w + 2 * pad - s) / stride + 1; }
};

// y [n, k, outH, outW] = conv(x, w) + b (b may be null).
void conv2dForward(const Conv2dShape& g, const float* x, const float* w, const float* b, float* y);

// Gradients from dy [n, k, outH, outW]. Each of dx, dw, db may be null (not
// wanted); accumulate_* selects += over = for the ones given.
void conv2dBackward(const Conv2dShape& g, const float* x, const float* w, const float* dy, float* dx,
                    bool accumulate_dx, float* dw, bool accumulate_dw, float* db, bool accumulate_db);

// The 2x2, stride-2 max pooling (maxPool2dForward) of conv2dForward's
// output, without storing that output: each chunk of images is pooled while
// it is in cache. y [n, k, outH / 2, outW / 2]; argmax within the [outH,
// outW] planes. The same bits as the two kernels one after the other.
void conv2dMaxPoolForward(const Conv2dShape& g, const float* x, const float* w, const float* b, float* y,
                          std::int32_t* argmax);
// conv2dBackward from the pooled output's gradient dy_pooled [n, k, outH / 2,
// outW / 2], routed through argmax chunk by chunk (maxPool2dBackward's dy,
// never stored whole). The same bits as the two kernels.
void conv2dMaxPoolBackward(const Conv2dShape& g, const float* x, const float* w, const float* dy_pooled,
                           const std::int32_t* argmax, float* dx, bool accumulate_dx, float* dw, bool accumulate_dw,
                           float* db, bool accumulate_db);

}  // namespace hpu::device::kernels
