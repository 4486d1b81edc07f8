// Reduced-precision numerics of the emulated device: bfloat16, float16 and the
// OCP 8-bit formats (OCP "8-bit Floating Point Specification (OFP8)", rev 1.0,
// 2023: E4M3 and E5M2), all rounding to nearest, ties to even.
//
// Device tensors of a floating dtype hold float32 values that are exactly
// representable in that dtype; roundInPlace() puts values there. The *Bits
// functions encode and decode the formats' bit patterns, and for every x
//   roundTo(x, t) == decode(encode(x))   bit for bit (fp8: saturating encode).
//
// NaN encodings follow PyTorch's CPU conversions where PyTorch has the dtype:
// bfloat16 NaN is 0xFFFF, float16 NaN is sign|0x7E00, E5M2 NaN is sign|0x7E;
// E4M3's only NaN is sign|0x7F. Decoded NaNs are quiet float NaNs keeping the
// sign. Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "hpu/device/dtype.h"

namespace hpu::device {

// ---- bfloat16 / float16 ----
std::uint16_t toBFloat16Bits(float x);
float fromBFloat16Bits(std::uint16_t bits);
// Overflow (|x| >= 65520 after rounding) gives +-Inf; subnormals are kept.
std::uint16_t toFloat16Bits(float x);
float fromFloat16Bits(std::uint16_t bits);

// ---- fp8 (REQUIRES: fp8 is kFloat8E4M3 or kFloat8E5M2) ----
inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kFp8E5M2Max = 57344.0f;
float fp8Max(DType fp8);

// What a value beyond the format's largest finite magnitude becomes.
enum class Fp8Overflow {
  kSaturate,   // +-max (OCP saturation mode; also +-Inf -> +-max)
  kNonFinite,  // E4M3: NaN (it has no Inf); E5M2: +-Inf
};
std::uint8_t toFp8Bits(float x, DType fp8, Fp8Overflow overflow = Fp8Overflow::kSaturate);
float fromFp8Bits(std::uint8_t bits, DType fp8);

// ---- rounding values to a dtype, kept as float ----
// REQUIRES: t is a floating dtype other than kFloat64. kFloat32 is the
// identity; fp8 saturates (as Transformer Engine's casts do).
float roundTo(float x, DType t);
// Bulk form of roundTo; branch-free and vectorized, on the intra-op threads
// for large spans.
void roundInPlace(std::span<float> data, DType t);
// to[i] = roundTo(from[i], t) in one pass (a cast). REQUIRES: equal sizes.
void roundCopy(std::span<const float> from, std::span<float> to, DType t);

// ---- per-tensor fp8 scaling (Transformer Engine's DelayedScaling recipe) ----
// max |x|; NaN if data holds a NaN; 0 for empty data.
float absMax(std::span<const float> data);
// scale = (fp8Max / amax) / 2^margin. Keeps previousScale when amax is 0,
// not finite, or the scale would not be finite (as TE's default scaling).
float fp8ScaleFromAmax(float amax, float previousScale, DType fp8, int margin = 0);
// data = round_fp8(data * scale), saturating: the values an fp8 tensor holds.
void quantizeFp8InPlace(std::span<float> data, DType fp8, float scale);
// data = data * (1 / scale), as TE multiplies by scale_inv.
void dequantizeFp8InPlace(std::span<float> data, float scale);

}  // namespace hpu::device
