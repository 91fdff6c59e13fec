// F16/BF16 <-> F32 conversions of common/engine/dtype.h against references computed another
// way: long-hand arithmetic in double (value = mantissa x 2^exponent; rounding by nearbyint,
// which rounds half to even), and where the CPU has F16C, the hardware conversion.
#include "common/engine/dtype.h"

#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "common/engine/model/random_weights.h"

#ifdef __F16C__
#include <immintrin.h>
#endif

namespace splitspec::engine {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 decoded by its definition. NaN for NaN patterns.
double HalfValue(uint16_t h) {
  const int sign = h >> 15;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double value;
  if (exponent == 0x1f) {
    value = mantissa ? NAN : INFINITY;
  } else if (exponent == 0) {
    value = std::ldexp(mantissa, -24);
  } else {
    value = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return sign ? -value : value;
}

// bfloat16 decoded by its definition (8 exponent bits, 7 mantissa bits, bias 127).
double BF16Value(uint16_t b) {
  const int sign = b >> 15;
  const int exponent = (b >> 7) & 0xff;
  const int mantissa = b & 0x7f;
  double value;
  if (exponent == 0xff) {
    value = mantissa ? NAN : INFINITY;
  } else if (exponent == 0) {
    value = std::ldexp(mantissa, -133);
  } else {
    value = std::ldexp(128 + mantissa, exponent - 134);
  }
  return sign ? -value : value;
}

// Rounds |x| to `mantissa_bits` bits below the leading one with exponent floor `min_exponent`
// (where subnormals start), half to even. Returns infinity past `overflow`.
double RoundLongHand(double x, int mantissa_bits, int min_exponent, double overflow) {
  const double a = std::fabs(x);
  int exp2 = 0;
  std::frexp(a, &exp2);  // a = f * 2^exp2, f in [0.5, 1)
  const int exponent = std::max(exp2 - 1, min_exponent);
  const double ulp = std::ldexp(1.0, exponent - mantissa_bits);
  const double rounded = std::nearbyint(a / ulp) * ulp;  // default mode: half to even
  const double result = rounded >= overflow ? INFINITY : rounded;
  return std::signbit(x) ? -result : result;
}

// The binary16 pattern of each exactly representable non-negative value.
const std::map<double, uint16_t>& HalfPatterns() {
  static const auto* patterns = [] {
    auto* map = new std::map<double, uint16_t>();
    for (uint32_t h = 0; h <= 0x7c00; ++h) (*map)[HalfValue(static_cast<uint16_t>(h))] = h;
    return map;
  }();
  return *patterns;
}

// Reference float -> half: long-hand rounding, then the pattern of the rounded value.
uint16_t ReferenceF32ToF16(float f) {
  // Half: 10 mantissa bits, normals from 2^-14, overflow from 2^16 (the next binade).
  const double rounded = RoundLongHand(f, 10, -14, 65536.0);
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  return sign | HalfPatterns().at(std::fabs(rounded));
}

uint16_t ReferenceF32ToBF16(float f) {
  const double rounded = RoundLongHand(f, 7, -126, std::ldexp(1.0, 128));
  return static_cast<uint16_t>(Bits(static_cast<float>(rounded)) >> 16);  // exact: fits a float
}

// Floats that stress rounding for a 16-bit format: every representable value, every midpoint
// between neighbours, and the floats just either side of each midpoint.
std::vector<float> RoundingProbes(double (*decode)(uint16_t), uint16_t last_finite, double beyond) {
  std::vector<float> probes;
  for (uint32_t h = 0; h <= last_finite; ++h) {
    const double low = decode(static_cast<uint16_t>(h));
    const double high = h == last_finite ? beyond : decode(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((low + high) / 2);  // exact: one more bit than the format
    for (float f :
         {static_cast<float>(low), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      probes.push_back(f);
      probes.push_back(-f);
    }
  }
  return probes;
}

std::vector<float> RandomFloats(int n, uint64_t seed) {
  Xoshiro256 rng(seed);
  std::vector<float> floats;
  for (int i = 0; i < n; ++i) floats.push_back(FromBits(static_cast<uint32_t>(rng.Next())));
  return floats;
}

TEST(DTypeTest, F16ToF32IsExactForAllPatterns) {
  ASSERT_EQ(std::fegetround(), FE_TONEAREST);
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float got = F16ToF32(static_cast<uint16_t>(h));
    const double want = HalfValue(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << h;
      continue;
    }
    EXPECT_EQ(got, want) << std::hex << h;
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << std::hex << h;
#ifdef __F16C__
    EXPECT_EQ(Bits(got), Bits(_cvtsh_ss(static_cast<uint16_t>(h)))) << std::hex << h;
#endif
  }
}

void CheckF32ToF16(float f) {
  const uint16_t got = F32ToF16(f);
  if (std::isnan(f)) {
    EXPECT_TRUE(std::isnan(HalfValue(got))) << std::hex << Bits(f);
    return;
  }
  ASSERT_EQ(got, ReferenceF32ToF16(f)) << std::hex << "float bits " << Bits(f);
#ifdef __F16C__
  ASSERT_EQ(got, _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)) << std::hex << Bits(f);
#endif
}

TEST(DTypeTest, F32ToF16RoundsToNearestEven) {
  for (float f : RoundingProbes(HalfValue, 0x7bff, 65536.0)) CheckF32ToF16(f);
  for (float f : RandomFloats(1 << 21, 7)) CheckF32ToF16(f);
  for (float f : {INFINITY, -INFINITY, NAN, 1e-30f, -1e-30f, 1e30f, FromBits(1)}) CheckF32ToF16(f);
}

TEST(DTypeTest, F32ToF16KnownTiesAndOverflow) {
  // Spot checks whose answers follow from the format alone.
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie between 1 and 1+2^-10: even
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie: up to even
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65519.99f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);               // tie with 2^16 rounds to inf
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal: even
  EXPECT_EQ(F32ToF16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000);
}

TEST(DTypeTest, BF16ToF32IsExactForAllPatterns) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float got = BF16ToF32(static_cast<uint16_t>(b));
    const double want = BF16Value(static_cast<uint16_t>(b));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << b;
      continue;
    }
    EXPECT_EQ(got, want) << std::hex << b;
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << std::hex << b;
  }
}

void CheckF32ToBF16(float f) {
  const uint16_t got = F32ToBF16(f);
  if (std::isnan(f)) {
    EXPECT_TRUE(std::isnan(BF16Value(got))) << std::hex << Bits(f);
    return;
  }
  ASSERT_EQ(got, ReferenceF32ToBF16(f)) << std::hex << "float bits " << Bits(f);
}

TEST(DTypeTest, F32ToBF16RoundsToNearestEven) {
  for (float f : RoundingProbes(BF16Value, 0x7f7f, std::ldexp(1.0, 128))) CheckF32ToBF16(f);
  for (float f : RandomFloats(1 << 21, 11)) CheckF32ToBF16(f);
  for (float f : {INFINITY, -INFINITY, NAN, -NAN, FromBits(0x7f800001), FromBits(1)}) {
    CheckF32ToBF16(f);
  }
  EXPECT_EQ(F32ToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie: stays even
  EXPECT_EQ(F32ToBF16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie: up to even
}

}  // namespace
}  // namespace splitspec::engine
