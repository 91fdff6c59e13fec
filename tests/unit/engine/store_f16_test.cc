// simd.h's StoreF16 rounds every lane as F32ToF16 (dtype.h) does, ties to even, subnormals,
// overflow to infinity and all: the F16 KV cache writes its rows with it, a row's tail with
// F32ToF16, and a position must not depend on which of the two wrote it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/engine/cpu/simd.h"
#include "common/engine/dtype.h"

namespace splitspec::engine::cpu {
namespace {

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

TEST(StoreF16Test, EveryLaneRoundsAsF32ToF16) {
  std::vector<float> values;
  // A stride through every sign, exponent and mantissa, and the edges around the half range:
  // the largest half, the overflow threshold, the smallest subnormal and the ties between.
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4093) values.push_back(FromBits(static_cast<uint32_t>(bits)));
  for (const uint32_t bits : {0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477fffffu, 0x33000000u, 0x33000001u,
                              0x33800000u, 0x38800000u, 0x387fc000u, 0x3f801000u, 0x3f803000u, 0x7f800000u}) {
    values.push_back(FromBits(bits));
    values.push_back(-FromBits(bits));
  }
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  while (values.size() % kLanes != 0) values.push_back(0.0f);
  std::vector<uint16_t> stored(values.size());
  for (size_t i = 0; i < values.size(); i += kLanes) StoreF16(stored.data() + i, Load(values.data() + i));
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) {
      EXPECT_TRUE(std::isnan(F16ToF32(stored[i])));
      continue;
    }
    ASSERT_EQ(stored[i], F32ToF16(values[i])) << "value " << values[i];
  }
}

}  // namespace
}  // namespace splitspec::engine::cpu
