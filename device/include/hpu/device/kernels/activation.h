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

}  // namespace hpu::device::kernels
