// Elementwise activations: forward y = f(x) and backward dx (+)= dy * f'(x)
// (computed from x and y). Vectorised loops.
#pragma once

#include <cstdint>

namespace hpu::device::kernels {

enum class Activation { kReLU, kGELU, kGELUTanh, kTanh, kSigmoid, kSiLU };

void activationForward(Activation a, const float* x, float* y, std::int64_t n);
void activationBackward(Activation a, const float* x, const float* y, const float* dy, float* dx, std::int64_t n,
                        bool accumulate);

// SwiGLU (Llama's MLP): y = silu(gate) * up; backward dgate, dup (+)= their
// gradients.
void swigluForward(const float* gate, const float* up, float* y, std::int64_t n);
void swigluBackward(const float* gate, const float* up, const float* dy, float* dgate, float* dup, std::int64_t n,
                    bool accumulate);

// Dropout with probability p: element i is dropped when its 32-bit draw
// (the low half of counterDraw(key, i / 2) for even i, the high half for
// odd) is below p x 2^32. mask[i] = 0 when dropped, 1 / (1 - p) when kept;
// y = x * mask. The same bits on any number of threads.
void dropoutForward(std::uint64_t key, float p, const float* x, float* y, float* mask, std::int64_t n);
// dx (+)= dy * mask.
void dropoutBackward(const float* mask, const float* dy, float* dx, std::int64_t n, bool accumulate);

}  // namespace hpu::device::kernels
