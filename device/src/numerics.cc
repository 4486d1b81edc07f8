#include "hpu/device/numerics.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "hpu/device/check.h"
#include "hpu/device/threading.h"
#include "hpu/device/vector_clones.h"
#include "hpu/numerics/bfloat16.h"

namespace hpu::device {
namespace {

// Rounding a float to a narrower binary format, on float bit patterns
// (bfloat16's rule is the project's one, hpu/numerics/bfloat16.h).
//
// Normal range: drop the low kDrop mantissa bits with round-to-nearest-even
// by adding 0x7F..F plus the kept lsb and masking; a carry into the exponent
// is exactly the right result, including rounding up to the next binade or to
// Inf. Below the format's smallest normal the format's grid is uniform with
// spacing 2^(Emin-M), coarser than the normal-path mask assumes, so the value
// is rounded by the FPU instead: (|x| + C) - C with C = 2^(Emin-M+23), whose
// float ulp is exactly that spacing (the default FP environment rounds to
// nearest even).
//
// Everything is selects on 32-bit lanes, so loops over it vectorize.
constexpr std::uint32_t kAbsMask = 0x7FFFFFFFu;
constexpr std::uint32_t kSignMask = 0x80000000u;
constexpr std::uint32_t kInfBits = 0x7F800000u;
constexpr std::uint32_t kQuietNanBits = 0x7FC00000u;

struct Float16Format {
  static constexpr int kMantissaBits = 10;
  static constexpr int kBias = 15;
  static constexpr bool kSubnormalPath = true;
  static constexpr std::uint32_t kMinNormal = 0x38800000u;  // 2^-14
  static constexpr float kSubnormalC = 0x1p-1f;
  static constexpr std::uint32_t kMax = 0x477FE000u;  // 65504
  static constexpr std::uint32_t kOverflow = kInfBits;
  static constexpr bool kSignedNan = true;
  static constexpr std::uint32_t kNan = kQuietNanBits;
  static constexpr std::uint32_t kInfCode = 0x7C00u;
  static constexpr std::uint32_t kNanCode = 0x7E00u;
};

struct E4M3Format {
  static constexpr int kMantissaBits = 3;
  static constexpr int kBias = 7;
  static constexpr bool kSubnormalPath = true;
  static constexpr std::uint32_t kMinNormal = 0x3C800000u;  // 2^-6
  static constexpr float kSubnormalC = 0x1p14f;
  static constexpr std::uint32_t kMax = 0x43E00000u;         // 448
  static constexpr std::uint32_t kOverflow = kQuietNanBits;  // no Inf in E4M3
  static constexpr bool kSignedNan = true;
  static constexpr std::uint32_t kNan = kQuietNanBits;
  static constexpr std::uint32_t kInfCode = 0x7Fu;  // unreachable: overflow is NaN
  static constexpr std::uint32_t kNanCode = 0x7Fu;
};

struct E5M2Format {
  static constexpr int kMantissaBits = 2;
  static constexpr int kBias = 15;
  static constexpr bool kSubnormalPath = true;
  static constexpr std::uint32_t kMinNormal = 0x38800000u;  // 2^-14
  static constexpr float kSubnormalC = 0x1p7f;
  static constexpr std::uint32_t kMax = 0x47600000u;  // 57344
  static constexpr std::uint32_t kOverflow = kInfBits;
  static constexpr bool kSignedNan = true;
  static constexpr std::uint32_t kNan = kQuietNanBits;
  static constexpr std::uint32_t kInfCode = 0x7Cu;
  static constexpr std::uint32_t kNanCode = 0x7Eu;  // PyTorch's float8_e5m2 NaN
};

// The float bits of x rounded to F's value set: the core of every conversion.
template <class F, bool kSaturate>
inline std::uint32_t roundBits(std::uint32_t w) {
  constexpr int kDrop = 23 - F::kMantissaBits;
  const std::uint32_t sign = w & kSignMask;
  const std::uint32_t a = w & kAbsMask;
  std::uint32_t r = (a + ((1u << (kDrop - 1)) - 1u) + ((a >> kDrop) & 1u)) & ~((1u << kDrop) - 1u);
  if constexpr (F::kSubnormalPath) {
    const float small = (std::bit_cast<float>(a) + F::kSubnormalC) - F::kSubnormalC;
    r = a < F::kMinNormal ? std::bit_cast<std::uint32_t>(small) : r;
  }
  r = r > F::kMax ? (kSaturate ? F::kMax : F::kOverflow) : r;
  const std::uint32_t nan = F::kSignedNan ? (sign | F::kNan) : F::kNan;
  return a > kInfBits ? nan : (sign | r);
}

template <class F, bool kSaturate>
inline float roundValue(float x) {
  return std::bit_cast<float>(roundBits<F, kSaturate>(std::bit_cast<std::uint32_t>(x)));
}

inline float roundBFloat16(float x) {
  return std::bit_cast<float>(numerics::roundToBFloat16(std::bit_cast<std::uint32_t>(x)));
}

// to[i] = kRound(from[i]) for i in [0, n); from may be to. In the copy of the
// kernels' vector level (vector_clones.h).
template <float (*kRound)(float)>
void roundLoop(const float* from, float* to, std::int64_t n) {
  onVectorLevel([&]() HPU_LOOP_BODY {
    for (std::int64_t i = 0; i < n; ++i) to[i] = kRound(from[i]);
  });
}
void roundBFloat16Loop(const float* from, float* to, std::int64_t n) { roundLoop<roundBFloat16>(from, to, n); }
void roundFloat16Loop(const float* from, float* to, std::int64_t n) {
  roundLoop<roundValue<Float16Format, false>>(from, to, n);
}
void roundE4M3Loop(const float* from, float* to, std::int64_t n) {
  roundLoop<roundValue<E4M3Format, true>>(from, to, n);
}
void roundE5M2Loop(const float* from, float* to, std::int64_t n) {
  roundLoop<roundValue<E5M2Format, true>>(from, to, n);
}

// loop(from, to, n) over [0, n) in ranges, on the intra-op threads when that pays.
void roundSpan(void (*loop)(const float*, float*, std::int64_t), const float* from, float* to, std::int64_t n) {
  static ParallelSite site("round to narrow float");
  parallelFor(site, n, 1 << 10, static_cast<double>(n),
              [=](std::int64_t begin, std::int64_t end) { loop(from + begin, to + begin, end - begin); });
}

// Encodes x in F (sign bit at bit 15 for float16, bit 7 for fp8).
template <class F, bool kSaturate, int kSignShift>
std::uint32_t encode(float x) {
  const std::uint32_t r = roundBits<F, kSaturate>(std::bit_cast<std::uint32_t>(x));
  const std::uint32_t sign = (r & kSignMask) >> kSignShift;
  const std::uint32_t a = r & kAbsMask;
  if (a > kInfBits) return sign | F::kNanCode;
  if (a == kInfBits) return sign | F::kInfCode;
  if (a < F::kMinNormal)  // exact: a is a multiple of the subnormal spacing
    return sign | static_cast<std::uint32_t>(std::ldexp(std::bit_cast<float>(a), F::kMantissaBits - (1 - F::kBias)));
  return sign | ((a >> (23 - F::kMantissaBits)) - (static_cast<std::uint32_t>(127 - F::kBias) << F::kMantissaBits));
}

// Decodes an IEEE-like code (all-ones exponent is Inf/NaN), or E4M3 where
// only S.1111.111 is special (NaN).
template <class F, int kSignShift, int kExponentBits, bool kIeeeSpecials>
float decode(std::uint32_t code) {
  constexpr std::uint32_t kMantissaMask = (1u << F::kMantissaBits) - 1u;
  constexpr std::uint32_t kExponentMask = (1u << kExponentBits) - 1u;
  const std::uint32_t sign = (code << kSignShift) & kSignMask;
  const std::uint32_t e = (code >> F::kMantissaBits) & kExponentMask;
  const std::uint32_t m = code & kMantissaMask;
  if (kIeeeSpecials ? e == kExponentMask : (e == kExponentMask && m == kMantissaMask)) {
    const std::uint32_t special = (kIeeeSpecials && m == 0) ? kInfBits : kQuietNanBits;
    return std::bit_cast<float>(sign | special);
  }
  if (e == 0) {
    const float magnitude = std::ldexp(static_cast<float>(m), (1 - F::kBias) - F::kMantissaBits);
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((e + 127u - F::kBias) << 23) | (m << (23 - F::kMantissaBits)));
}

void requireFp8(DType t) { HPU_CHECK(isFp8(t), "{} is not an fp8 dtype", dtypeName(t)); }

}  // namespace

std::uint16_t toBFloat16Bits(float x) { return numerics::toBFloat16Bits(x); }

float fromBFloat16Bits(std::uint16_t bits) { return numerics::fromBFloat16Bits(bits); }

std::uint16_t toFloat16Bits(float x) { return static_cast<std::uint16_t>(encode<Float16Format, false, 16>(x)); }

float fromFloat16Bits(std::uint16_t bits) { return decode<Float16Format, 16, 5, true>(bits); }

float fp8Max(DType fp8) {
  requireFp8(fp8);
  return fp8 == DType::kFloat8E4M3 ? kFp8E4M3Max : kFp8E5M2Max;
}

std::uint8_t toFp8Bits(float x, DType fp8, Fp8Overflow overflow) {
  requireFp8(fp8);
  const bool sat = overflow == Fp8Overflow::kSaturate;
  std::uint32_t code;
  if (fp8 == DType::kFloat8E4M3)
    code = sat ? encode<E4M3Format, true, 24>(x) : encode<E4M3Format, false, 24>(x);
  else
    code = sat ? encode<E5M2Format, true, 24>(x) : encode<E5M2Format, false, 24>(x);
  return static_cast<std::uint8_t>(code);
}

float fromFp8Bits(std::uint8_t bits, DType fp8) {
  requireFp8(fp8);
  return fp8 == DType::kFloat8E4M3 ? decode<E4M3Format, 24, 4, false>(bits) : decode<E5M2Format, 24, 5, true>(bits);
}

float roundTo(float x, DType t) {
  switch (t) {
    case DType::kFloat32:
      return x;
    case DType::kBFloat16:
      return roundBFloat16(x);
    case DType::kFloat16:
      return roundValue<Float16Format, false>(x);
    case DType::kFloat8E4M3:
      return roundValue<E4M3Format, true>(x);
    case DType::kFloat8E5M2:
      return roundValue<E5M2Format, true>(x);
    default:
      break;
  }
  HPU_CHECK(false, "roundTo: {} is not a device floating dtype", dtypeName(t));
}

void roundCopy(std::span<const float> from, std::span<float> to, DType t) {
  HPU_CHECK(from.size() == to.size(), "roundCopy: {} values into {}", from.size(), to.size());
  const float* src = from.data();
  float* dst = to.data();
  const auto n = static_cast<std::int64_t>(from.size());
  switch (t) {
    case DType::kFloat32:
      if (src != dst) std::copy(src, src + n, dst);
      return;
    case DType::kBFloat16:
      return roundSpan(roundBFloat16Loop, src, dst, n);
    case DType::kFloat16:
      return roundSpan(roundFloat16Loop, src, dst, n);
    case DType::kFloat8E4M3:
      return roundSpan(roundE4M3Loop, src, dst, n);
    case DType::kFloat8E5M2:
      return roundSpan(roundE5M2Loop, src, dst, n);
    default:
      break;
  }
  HPU_CHECK(false, "roundCopy: {} is not a device floating dtype", dtypeName(t));
}

void roundInPlace(std::span<float> data, DType t) { roundCopy(data, data, t); }

float absMax(std::span<const float> data) {
  // On magnitude bit patterns unsigned order is value order, and every NaN
  // sorts above Inf: an integer max that vectorizes and propagates NaN.
  std::uint32_t m = 0;
  for (float x : data) m = std::max(m, std::bit_cast<std::uint32_t>(x) & kAbsMask);
  return std::bit_cast<float>(m);
}

float fp8ScaleFromAmax(float amax, float previousScale, DType fp8, int margin) {
  const float scale = std::ldexp(fp8Max(fp8) / amax, -margin);
  if (!(amax > 0.0f) || !std::isfinite(amax) || !std::isfinite(scale)) return previousScale;
  return scale;
}

void quantizeFp8InPlace(std::span<float> data, DType fp8, float scale) {
  requireFp8(fp8);
  float* p = data.data();
  const std::size_t n = data.size();
  if (fp8 == DType::kFloat8E4M3)
    for (std::size_t i = 0; i < n; ++i) p[i] = roundValue<E4M3Format, true>(p[i] * scale);
  else
    for (std::size_t i = 0; i < n; ++i) p[i] = roundValue<E5M2Format, true>(p[i] * scale);
}

void dequantizeFp8InPlace(std::span<float> data, float scale) {
  const float inverse = 1.0f / scale;
  for (float& x : data) x *= inverse;
}

}  // namespace hpu::device
