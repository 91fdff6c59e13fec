// The attention softmax's vectorized exp (common/engine/cpu/vector_exp.h) against the C library's
// exp in double precision, on whichever path this binary was built for (engine_test: the build's
// own; vector_exp_avx2_test / vector_exp_portable_test: the others on x86-64).
#include "common/engine/cpu/vector_exp.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::engine::cpu {
namespace {

float ExpOf(float x) {
  ExpInPlace(&x, 1, 0.0f);
  return x;
}

// Distance in units in the last place of the correctly rounded f32 result.
double UlpsFromExp(float got, float x) {
  const double exact = std::exp(static_cast<double>(x));
  const float rounded = static_cast<float>(exact);
  const double ulp = std::nextafter(rounded, std::numeric_limits<float>::infinity()) - rounded;
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

TEST(VectorExpTest, WithinTwoUlpOfExpAboveFltMin) {
  std::vector<float> x;
  for (float v = -87.0f; v <= 88.0f; v += 0.0137f) x.push_back(v);
  for (float v = -1.0f; v <= 1.0f; v += 1.0f / 4096) x.push_back(v);  // around 0, where a softmax's weights are
  std::vector<float> y = x;
  ExpInPlace(y.data(), y.size(), 0.0f);
  double worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double ulps = UlpsFromExp(y[i], x[i]);
    if (ulps > worst) {
      worst = ulps;
      worst_x = x[i];
    }
  }
  EXPECT_LE(worst, 2.0) << "at x = " << worst_x;
}

TEST(VectorExpTest, EdgesOfItsDomain) {
  EXPECT_EQ(ExpOf(0.0f), 1.0f);  // the softmax's largest score weighs exactly 1
  EXPECT_EQ(ExpOf(-0.0f), 1.0f);
  EXPECT_EQ(ExpOf(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(ExpOf(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(ExpOf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(ExpOf(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(ExpOf(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isfinite(ExpOf(88.5f)));
  // Past FLT_MIN a result may round to 0 or into the subnormals, never above FLT_MIN.
  for (float v = -103.0f; v < -87.4f; v += 0.25f) {
    const float y = ExpOf(v);
    EXPECT_GE(y, 0.0f) << v;
    EXPECT_LE(y, FLT_MIN) << v;
  }
}

TEST(VectorExpTest, AResultDependsOnlyOnItsInput) {
  // Every index of every row length, whole vectors and tails alike, gives the bits that the
  // value gives alone, and the shift is subtracted as a float subtraction would.
  std::vector<float> values;
  for (int i = 0; i < 37; ++i) values.push_back(-0.37f * static_cast<float>(i) + 0.011f * static_cast<float>(i % 5));
  for (size_t n = 1; n <= values.size(); ++n) {
    std::vector<float> row(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n));
    ExpInPlace(row.data(), n, 0.5f);
    for (size_t i = 0; i < n; ++i) {
      const float alone = ExpOf(values[i] - 0.5f);
      EXPECT_EQ(std::memcmp(&row[i], &alone, sizeof alone), 0) << "n " << n << " index " << i;
    }
  }
}

}  // namespace
}  // namespace splitspec::engine::cpu
