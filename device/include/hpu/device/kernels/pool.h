// 2-D max and average pooling over NCHW planes (square windows).
#pragma once

#include <cstdint>

namespace hpu::device::kernels {

struct Pool2dShape {
  std::int64_t planes;  // n * c
  std::int64_t h, w;
  std::int64_t kernel, stride, pad;

  std::int64_t outH() const { return (h + 2 * pad - kernel) / stride + 1; }
  std::int64_t outW() const { return (w + 2 * pad - kernel) / stride + 1; }
};

// y = max over each window; argmax gets the winning input index within its
// plane (for backward). The first maximum wins; a NaN beats any number.
void maxPool2dForward(const Pool2dShape& g, const float* x, float* y, std::int32_t* argmax);
// dx (+)= dy routed to each window's argmax.
void maxPool2dBackward(const Pool2dShape& g, const float* dy, const std::int32_t* argmax, float* dx, bool accumulate);
// The same, on this thread, for planes [p0, p1) of a 2x2, stride-2,
// unpadded pool (kernels that pool their own outputs: conv.h).
void maxPool2x2Planes(const Pool2dShape& g, std::int64_t p0, std::int64_t p1, const float* x, float* y,
                      std::int32_t* argmax);
void maxPool2dBackwardPlanes(const Pool2dShape& g, std::int64_t p0, std::int64_t p1, const float* dy,
                             const std::int32_t* argmax, float* dx, bool accumulate);
// Mean over each window, zero padding counted (torch's count_include_pad=True).
void avgPool2dForward(const Pool2dShape& g, const float* x, float* y);
void avgPool2dBackward(const Pool2dShape& g, const float* dy, float* dx, bool accumulate);

}  // namespace hpu::device::kernels
