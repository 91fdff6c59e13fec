// OnlineForwardFit: converges to known coefficients from noisy synthetic steps, is not moved
// far by an outlier step, keeps memory bounded by its window, and adopts no fit while the
// window cannot identify the coefficients (batch sizes never varied).
#include "router/online_fit.h"

#include <gtest/gtest.h>

#include <random>

namespace splitspec::router {
namespace {

constexpr ForwardCoefficients kTruth{2e-7, 3e-5, 4e-3};

double Noisy(double seconds, std::mt19937_64& rng) {
  std::normal_distribution<double> noise(1.0, 0.02);
  return seconds * noise(rng);
}

TEST(OnlineFitTest, ConvergesToTheTrueCoefficients) {
  OnlineForwardFit fit;
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int> context(0, 8000), batched(1, 64);
  for (int i = 0; i < 2000; ++i) {
    const double c = context(rng), b = batched(rng);
    fit.Observe(c, b, Noisy(kTruth.Predict(c, b), rng));
  }
  ASSERT_TRUE(fit.current().has_value());
  const ForwardCoefficients& got = fit.current()->coefficients;
  EXPECT_NEAR(got.alpha, kTruth.alpha, 0.1 * kTruth.alpha);
  EXPECT_NEAR(got.gamma, kTruth.gamma, 0.1 * kTruth.gamma);
  EXPECT_NEAR(got.delta, kTruth.delta, 0.1 * kTruth.delta);
  EXPECT_GT(fit.refits(), 10);
}

TEST(OnlineFitTest, OneOutlierStepDoesNotMoveTheFitFar) {
  OnlineForwardFit fit(OnlineFitOptions{512, 1, 4.0});  // refit after every step
  std::mt19937_64 rng(2);
  std::uniform_int_distribution<int> context(0, 8000), batched(1, 64);
  for (int i = 0; i < 600; ++i) {
    const double c = context(rng), b = batched(rng);
    fit.Observe(c, b, Noisy(kTruth.Predict(c, b), rng));
  }
  ASSERT_TRUE(fit.current().has_value());
  const ForwardCoefficients before = fit.current()->coefficients;
  fit.Observe(100, 2, 100 * kTruth.Predict(100, 2));  // a step stalled a hundredfold
  const ForwardCoefficients after = fit.current()->coefficients;
  EXPECT_NEAR(after.delta, before.delta, 0.02 * before.delta);
  EXPECT_NEAR(after.gamma, before.gamma, 0.02 * before.gamma);
  EXPECT_GE(fit.outliers_dropped_last(), 1);
}

TEST(OnlineFitTest, FollowsAMachineThatSlowsDown) {
  OnlineForwardFit fit(OnlineFitOptions{256, 16, 4.0});
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> context(0, 8000), batched(1, 64);
  for (double slowdown : {1.0, 2.0}) {
    for (int i = 0; i < 600; ++i) {
      const double c = context(rng), b = batched(rng);
      fit.Observe(c, b, Noisy(slowdown * kTruth.Predict(c, b), rng));
    }
  }
  ASSERT_TRUE(fit.current().has_value());
  EXPECT_NEAR(fit.current()->coefficients.delta, 2 * kTruth.delta, 0.2 * kTruth.delta);
}

TEST(OnlineFitTest, NoFitWhileBatchSizesNeverVary) {
  OnlineForwardFit fit;
  std::mt19937_64 rng(4);
  for (int i = 0; i < 200; ++i) {
    const double c = 100 + i;
    fit.Observe(c, 4, Noisy(kTruth.Predict(c, 4), rng));
  }
  EXPECT_FALSE(fit.current().has_value());
  EXPECT_EQ(fit.observations(), 200);
}

}  // namespace
}  // namespace splitspec::router
