//===- Float16Test.cpp - bf16/f16 <-> f32 conversions (Float16.h) ---------===//
//
// Part of offload. Known bit patterns (ties, overflow, NaN, subnormals,
// signed zeros), then the conversions against an independent reference:
// every 16-bit pattern widens and narrows back to itself, and f32 values
// (all bf16/f16 midpoints and their neighbours, plus random bits) round to
// the nearest representable value found by search over the sorted finite
// values, ties to the even pattern.
//
//===----------------------------------------------------------------------===//

#include "offload/Runtime/Float16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace offload::rt;

namespace {

float f(uint32_t bits) { return floatFromBits(bits); }

TEST(Float16Test, Bf16KnownPatterns) {
  struct Case {
    uint32_t in;
    uint16_t out;
  } cases[] = {
      {0x3f800000, 0x3f80}, // 1
      {0xbf800000, 0xbf80}, // -1
      {0x3f808000, 0x3f80}, // 1 + 2^-8: a tie, to even (down)
      {0x3f818000, 0x3f82}, // 1 + 3 * 2^-8: a tie, to even (up)
      {0x3f808001, 0x3f81}, // just above the tie
      {0x3f807fff, 0x3f80}, // just below
      {0x7f7f7fff, 0x7f7f}, // below half an ulp past the largest finite
      {0x7f7f8000, 0x7f80}, // the tie past the largest finite: inf
      {0x7f7fffff, 0x7f80}, // FLT_MAX: inf
      {0x7f800000, 0x7f80}, // inf
      {0xff800000, 0xff80}, // -inf
      {0x00000000, 0x0000}, // +0
      {0x80000000, 0x8000}, // -0
      {0x00000001, 0x0000}, // smallest f32 subnormal: rounds to 0
      {0x00008000, 0x0000}, // a subnormal tie, to even
      {0x00018000, 0x0002}, // a subnormal tie, to even (up)
      {0x007fffff, 0x0080}, // largest f32 subnormal: up to the smallest normal
  };
  for (const Case &c : cases)
    EXPECT_EQ(floatToBf16(f(c.in)), c.out) << std::hex << c.in;
  // NaN stays NaN, quiet, sign kept, even with a payload only in the low
  // bits that plain rounding would carry into inf.
  for (uint32_t nan : {0x7f800001u, 0x7fffffffu, 0x7fc00000u, 0xff800001u}) {
    uint16_t h = floatToBf16(f(nan));
    EXPECT_TRUE(std::isnan(bf16ToFloat(h))) << std::hex << nan;
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000);
    EXPECT_TRUE(h & 0x0040) << "quiet";
  }
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(bf16ToFloat(0xc020), -2.5f);
  EXPECT_EQ(floatBits(bf16ToFloat(0x0001)), 0x00010000u); // a subnormal, exact
}

TEST(Float16Test, F16KnownPatterns) {
  struct Case {
    float in;
    uint16_t out;
  } cases[] = {
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {0.1f, 0x2e66},
      {65504.0f, 0x7bff},                      // largest finite
      {65519.99f, 0x7bff},                     // below the tie
      {65520.0f, 0x7c00},                      // the tie past it: inf
      {1e9f, 0x7c00},                          // overflow
      {-1e9f, 0xfc00},
      {std::ldexp(1.0f, -14), 0x0400},         // smallest normal
      {std::ldexp(1.0f, -24), 0x0001},         // smallest subnormal
      {std::ldexp(1.0f, -25), 0x0000},         // a tie, to even (0)
      {std::ldexp(1.0f, -25) * 1.0001f, 0x0001}, // just above it
      {std::ldexp(3.0f, -25), 0x0002},         // 1.5 units: a tie, to even
      {std::ldexp(1023.5f, -24), 0x0400},      // a tie, up to the smallest normal
      {std::ldexp(1.0f, -26), 0x0000},
      {1e-8f, 0x0000},
      {-std::ldexp(1.0f, -24), 0x8001},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f + std::ldexp(1.0f, -11), 0x3c00}, // a tie, to even (down)
      {1.0f + std::ldexp(3.0f, -11), 0x3c02}, // a tie, to even (up)
      {std::numeric_limits<float>::infinity(), 0x7c00},
  };
  for (const Case &c : cases)
    EXPECT_EQ(floatToF16(c.in), c.out) << c.in;
  for (uint32_t nan : {0x7f800001u, 0x7fc00000u, 0xffffffffu}) {
    uint16_t h = floatToF16(f(nan));
    EXPECT_TRUE(std::isnan(f16ToFloat(h))) << std::hex << nan;
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000);
  }
  EXPECT_EQ(f16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(f16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16ToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16ToFloat(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(f16ToFloat(0x8000)));
  EXPECT_TRUE(std::isinf(f16ToFloat(0xfc00)) && f16ToFloat(0xfc00) < 0);
}

/// Every 16-bit pattern widens exactly and narrows back to itself (NaNs to
/// a NaN).
TEST(Float16Test, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float b = bf16ToFloat(uint16_t(h)), x = f16ToFloat(uint16_t(h));
    if (std::isnan(b))
      EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(b))));
    else
      EXPECT_EQ(floatToBf16(b), h) << std::hex << h;
    if (std::isnan(x))
      EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(x))));
    else
      EXPECT_EQ(floatToF16(x), h) << std::hex << h;
  }
}

/// The reference: the nearest finite value by search (in double, exact for
/// these), ties to the even pattern; past the largest finite value by half
/// an ulp or more, inf.
struct Reference {
  std::vector<std::pair<double, uint16_t>> values; // non-negative, sorted
  double overflowAt;                               // max + ulp/2

  template <typename ToFloat> Reference(ToFloat widen, uint16_t maxPattern) {
    for (uint32_t h = 0; h <= maxPattern; ++h)
      values.push_back({double(widen(uint16_t(h))), uint16_t(h)});
    double max = values.back().first, prev = values[values.size() - 2].first;
    overflowAt = max + (max - prev) / 2;
  }
  uint16_t round(float x) const {
    double a = std::fabs(double(x));
    uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    if (a >= overflowAt)
      return sign | uint16_t(values.back().second + 1); // inf
    auto hi = std::lower_bound(values.begin(), values.end(),
                               std::make_pair(a, uint16_t(0)));
    if (hi == values.end()) // above the largest finite, below overflowAt
      return sign | values.back().second;
    if (hi->first == a)
      return sign | hi->second;
    auto lo = hi - 1;
    double dl = a - lo->first, dh = hi->first - a;
    uint16_t pick = dl < dh ? lo->second : dh < dl ? hi->second
                    : (lo->second & 1) ? hi->second : lo->second;
    return sign | pick;
  }
};

TEST(Float16Test, RoundingMatchesTheNearestValueReference) {
  Reference bf(bf16ToFloat, 0x7f7f), hf(f16ToFloat, 0x7bff);
  std::vector<float> xs;
  // Every midpoint between neighbours, and the floats next to it.
  for (const Reference *r : {&bf, &hf})
    for (size_t i = 0; i + 1 < r->values.size(); ++i) {
      float mid = float((r->values[i].first + r->values[i + 1].first) / 2);
      for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)})
        xs.insert(xs.end(), {x, -x});
    }
  std::mt19937 rng(29);
  for (int i = 0; i < 200000; ++i) {
    float x = floatFromBits(uint32_t(rng()));
    if (!std::isnan(x))
      xs.push_back(x);
  }
  int bad = 0;
  for (float x : xs) {
    if (floatToBf16(x) != bf.round(x) && ++bad < 10)
      ADD_FAILURE() << "bf16 of " << x << " (bits " << std::hex << floatBits(x)
                    << "): " << floatToBf16(x) << ", reference " << bf.round(x);
    if (floatToF16(x) != hf.round(x) && ++bad < 10)
      ADD_FAILURE() << "f16 of " << x << " (bits " << std::hex << floatBits(x)
                    << "): " << floatToF16(x) << ", reference " << hf.round(x);
  }
  EXPECT_EQ(bad, 0);
}

} // namespace
