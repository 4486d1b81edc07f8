// Elementwise activations: forward y = f(x) and backward dx (+)= dy * f'(x)
// (computed from x or y, as activationBackwardReads says). Vectorised loops.
#pragma once

#include <cstdint>

namespace hpu::device::kernels {

enum class Activation { kReLU, kGELU, kGELUTanh, kTanh, kSigmoid, kSiLU };

void activationForward(Activation a, const float* x, float* y, std::int64_t n);
// x or y may be null where activationBackwardReads says it is not read.
void activationBackward(Activation a, const float* x, const float* y, const float* dy, float* dx, std::int64_t n,
                        bool accumulate);
// Which of the forward's input and output the backward of `a` reads (what
// autograd keeps): ReLU, tanh and sigmoid their output, GELU and SiLU their
// input, as PyTorch's autograd saves them.
struct ActivationReads {
  bool x, y;
};
ActivationReads activationBackwardReads(Activation a);

// SwiGLU (Llama's MLP): y = silu(gate) * up; backward dgate, dup (+)= their
// gradients.
// y = silu(gate) * up; y may be gate itself (in place, the same values).
void swigluForward(const float* gate, const float* up, float* y, std::int64_t n);
void swigluBackward(const float* gate, const float* up, const float* dy, float* dgate, float* dup, std::int64_t n,
                    bool accumulate);

// Dropout with probability p: element i is dropped when its 32-bit draw
// (the low half of counterDraw(key, i / 2) for even i, the high half for
// odd) is below p x 2^32. mask[i] = 0 when dropped, 1 / (1 - p) when kept;
// y = x * mask (x may be y). The same bits on any number of threads.
void dropoutForward(std::uint64_t key, float p, const float* x, float* y, float* mask, std::int64_t n);
// dx (+)= dy * mask.
void dropoutBackward(const float* mask, const float* dy, float* dx, std::int64_t n, bool accumulate);

// Dropout's draw for probability p: element i is dropped when its draw is
// below `threshold`; a kept element is scaled by `keep`.
struct DropoutDraw {
  std::uint64_t key;
  std::uint32_t threshold;
  float keep;
  DropoutDraw(std::uint64_t key, float p);
  // mask[i] of dropoutForward.
  float maskAt(std::int64_t i) const;
  // Elements [first, first + n) of dropoutForward's stream, on this thread:
  // mask [n] and y [n] = x * mask (x may be y). Vectorised.
  void apply(std::int64_t first, const float* x, float* y, float* mask, std::int64_t n) const;
};

// dz = (dy * mask) * (y > 0 ? 1 : 0): ReLU's and dropout's backward in one
// pass, from y = dropout(relu(z)) (positive exactly where both kept the
// value). The same bits as the two backwards in turn.
void reluDropoutBackward(const float* mask, const float* y, const float* dy, float* dz, std::int64_t n);

}  // namespace hpu::device::kernels
