// The horizontal sums of simd.h: ReduceAddLanes (kLanes vectors at once, for attention's scores)
// gives each vector's ReduceAdd to the bit, whatever the values' signs and magnitudes, on
// whichever path (AVX-512, AVX2 or portable) this build compiles.
#include <cmath>
#include <cstring>
#include <random>

#include "common/engine/cpu/simd.h"
#include "gtest/gtest.h"

namespace splitspec::engine::cpu {
namespace {

TEST(ReduceAddLanesTest, EachLaneIsThatVectorsReduceAdd) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int trial = 0; trial < 20000; ++trial) {
    float values[kLanes][kLanes];
    // Magnitudes spread over 2^-30 .. 2^30, so that the order of the additions shows in the bits.
    for (auto& row : values) {
      for (float& x : row) x = std::ldexp(unit(rng), exponent(rng));
    }
    VecF v[kLanes];
    for (int p = 0; p < kLanes; ++p) v[p] = Load(values[p]);
    float sums[kLanes];
    Store(sums, ReduceAddLanes(v));
    for (int p = 0; p < kLanes; ++p) {
      const float one = ReduceAdd(v[p]);
      ASSERT_EQ(std::memcmp(&sums[p], &one, sizeof one), 0) << "trial " << trial << " vector " << p;
    }
  }
}

}  // namespace
}  // namespace splitspec::engine::cpu
