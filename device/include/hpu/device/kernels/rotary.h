// Rotary position embeddings in the rotate-half layout (Hugging Face's
// Llama): for a head vector x of even size D and position p, with the D/2
// inverse frequencies inv_freq_i (1 / theta^(2i / D), possibly rescaled) and
// a_i = p * inv_freq_i (float32, as Hugging Face computes them),
//   y_i       = x_i cos a_i - x_{i+D/2} sin a_i
//   y_{i+D/2} = x_{i+D/2} cos a_i + x_i sin a_i      for i < D/2.
// Backward is the rotation by -a.
#pragma once

#include <cstdint>

namespace hpu::device::kernels {

// x and y [groups, len, D]: every group (batch x heads) of `len` rows, row t
// at position positions[t]; inv_freq has D/2 values. y may alias x.
// token_major_heads > 0: x is [B, len, heads, D] instead (a projection's
// output, groups = B * heads) and y [B, heads, len, D]: the heads split in
// the same pass; y must not alias x then.
void rotaryForward(const float* x, std::int64_t groups, std::int64_t len, std::int64_t d, const std::int64_t* positions,
                   const float* inv_freq, float* y, std::int64_t token_major_heads = 0);
// dx (+)= the rotation of dy by -a; accumulate selects += over =. With
// token_major_heads, dy is [B, heads, len, D] and dx [B, len, heads, D].
void rotaryBackward(const float* dy, std::int64_t groups, std::int64_t len, std::int64_t d,
                    const std::int64_t* positions, const float* inv_freq, float* dx, bool accumulate,
                    std::int64_t token_major_heads = 0);

}  // namespace hpu::device::kernels
