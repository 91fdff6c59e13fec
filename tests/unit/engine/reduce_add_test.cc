// The horizontal sums of simd.h: ReduceAdd16 (sixteen at once, for attention's scores) gives each
// vector's ReduceAdd to the bit, whatever the values' signs and magnitudes. AVX-512 only: the
// other paths have no ReduceAdd16, and attention scores one position at a time there.
#include "common/engine/cpu/simd.h"

#if defined(__AVX512F__)

#include <cmath>
#include <cstring>
#include <random>

#include "gtest/gtest.h"

namespace splitspec::engine::cpu {
namespace {

TEST(ReduceAdd16Test, EachLaneIsThatVectorsReduceAdd) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int trial = 0; trial < 20000; ++trial) {
    alignas(64) float values[16][16];
    // Magnitudes spread over 2^-30 .. 2^30, so that the order of the additions shows in the bits.
    for (auto& row : values) {
      for (float& x : row) x = std::ldexp(unit(rng), exponent(rng));
    }
    __m512 v[16];
    for (int p = 0; p < 16; ++p) v[p] = _mm512_load_ps(values[p]);
    alignas(64) float sums[16];
    _mm512_store_ps(sums, ReduceAdd16(v));
    for (int p = 0; p < 16; ++p) {
      const float one = ReduceAdd(v[p]);
      ASSERT_EQ(std::memcmp(&sums[p], &one, sizeof one), 0) << "trial " << trial << " vector " << p;
    }
  }
}

}  // namespace
}  // namespace splitspec::engine::cpu

#endif
