//===- Float16.h - bf16 and f16 conversions to and from f32 -----*- C++ -*-===//
//
// Part of offload. The one definition of the 16-bit float formats the
// runtime stores (DType::BF16, DType::F16, PlanFormat.h), as raw uint16_t
// bits:
//
//   * bfloat16: 1 sign, 8 exponent, 7 mantissa bits: the top half of an f32
//     (same exponent range, 8 significant bits).
//   * f16 (IEEE 754 binary16): 1 sign, 5 exponent, 10 mantissa bits; largest
//     finite 65504, smallest normal 2^-14, subnormals down to 2^-24.
//
// To f32 is exact for both. From f32 rounds to nearest, ties to even (the
// rounding of PyTorch's c10::BFloat16 and c10::Half, and of CUDA's
// __float2bfloat16_rn / __float2half_rn):
//   * a NaN stays a NaN (quiet, sign and top payload bits kept): plain
//     rounding of the bits could carry a NaN with a small payload into inf;
//   * values past the largest finite value by half an ulp or more become
//     inf (bf16: >= 0x7F7F8000 in f32 bits; f16: |x| >= 65520);
//   * f16 results below 2^-14 are subnormal, rounded once (not twice via a
//     normal intermediate), down to +-0 below 2^-25.
// f64 values convert through f32 (double rounding), as PyTorch's own
// double -> bfloat16/half casts do.
//
// Standard C++ only, no state; usable from CUDA device code (OFFLOAD_HD).
// Tested against known bit patterns and every f16 value
// (unittests/Runtime/Float16Test.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef OFFLOAD_RUNTIME_FLOAT16_H
#define OFFLOAD_RUNTIME_FLOAT16_H

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define OFFLOAD_F16_HD __host__ __device__
#else
#define OFFLOAD_F16_HD
#endif

namespace offload {
namespace rt {

OFFLOAD_F16_HD inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
OFFLOAD_F16_HD inline float floatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// The bf16 value `h` as f32 (exact).
OFFLOAD_F16_HD inline float bf16ToFloat(uint16_t h) {
  return floatFromBits(uint32_t(h) << 16);
}

/// `f` rounded to bf16, to nearest even; NaN stays NaN.
OFFLOAD_F16_HD inline uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x0040u); // quiet NaN, sign and payload top
  u += 0x7fffu + ((u >> 16) & 1u);        // ties to even; carries into inf
  return uint16_t(u >> 16);
}

/// The f16 value `h` as f32 (exact, subnormals included).
OFFLOAD_F16_HD inline float f16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) // inf or NaN (payload kept)
    return floatFromBits(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (m == 0)
      return floatFromBits(sign);
    // Subnormal: m * 2^-24; normalise the mantissa.
    int32_t exp = 113; // f32 biased exponent of 2^-14
    while (!(m & 0x400u)) {
      m <<= 1;
      --exp;
    }
    return floatFromBits(sign | (uint32_t(exp) << 23) | ((m & 0x3ffu) << 13));
  }
  return floatFromBits(sign | ((e + 112u) << 23) | (m << 13));
}

/// `f` rounded to f16, to nearest even: overflow to inf, subnormals rounded
/// once, NaN stays NaN.
OFFLOAD_F16_HD inline uint16_t floatToF16(float f) {
  uint32_t u = floatBits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) // NaN: quiet, top payload bits kept
    return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) // |f| >= 65520 (and inf): rounds to inf
    return uint16_t(sign | 0x7c00u);
  if (a >= 0x38800000u) { // normal: |f| >= 2^-14
    uint32_t r = a - 0x38000000u; // rebias the exponent (127 -> 15)
    r += 0xfffu + ((r >> 13) & 1u);
    return uint16_t(sign | (r >> 13));
  }
  // Subnormal or zero: round (1.m * 2^(e-127)) / 2^-24 to an integer.
  uint32_t e = a >> 23;
  if (e < 102) // |f| < 2^-25: below half the smallest subnormal
    return sign;
  uint32_t m = (a & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - e; // 14..24
  uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u),
           half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u)))
    ++r; // may become 0x400, the smallest normal: the right encoding
  return uint16_t(sign | r);
}

} // namespace rt
} // namespace offload

#endif // OFFLOAD_RUNTIME_FLOAT16_H
