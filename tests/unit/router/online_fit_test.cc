// OnlineForwardFit: converges to known coefficients from noisy synthetic steps, is not moved
// far by an outlier step, keeps memory bounded by its window, and adopts no fit while the
// window cannot identify the coefficients (batch sizes never varied); with a prior, follows
// the prior's shape where the window cannot tell and the window where it can.
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

// n steps at random contexts (0..8000) and batch sizes (1..64), timed by `slowdown` x the truth
// with 2% noise: a window that identifies every coefficient.
void ObserveVariedSteps(OnlineForwardFit& fit, std::mt19937_64& rng, int n, double slowdown = 1.0) {
  std::uniform_int_distribution<int> context(0, 8000), batched(1, 64);
  for (int i = 0; i < n; ++i) {
    const double c = context(rng), b = batched(rng);
    fit.Observe(c, b, Noisy(slowdown * kTruth.Predict(c, b), rng));
  }
}

TEST(OnlineFitTest, ConvergesToTheTrueCoefficients) {
  OnlineForwardFit fit;
  std::mt19937_64 rng(1);
  ObserveVariedSteps(fit, rng, 2000);
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
  ObserveVariedSteps(fit, rng, 600);
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
  for (double slowdown : {1.0, 2.0}) ObserveVariedSteps(fit, rng, 600, slowdown);
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

// The lock-in a prior prevents: a few noisy steps at one batch size tilt the line (a steep
// gamma, so drafting looks dear), the policy stops drafting, and the window fills with
// 1-token steps. Without a prior that window is singular and the tilted fit stays; with one,
// gamma goes back to the prior's while the level follows the observed steps.
TEST(OnlineFitTest, APriorUndoesATiltThatOneTokenStepsCannotCorrect) {
  for (bool with_prior : {false, true}) {
    OnlineForwardFit fit(OnlineFitOptions{128, 8, 4.0});
    if (with_prior) fit.SetPrior(kTruth);
    std::mt19937_64 rng(5);
    // The tilt: 4-token steps that ran slow next to 1-token steps at their true time.
    for (int i = 0; i < 128; ++i) {
      const double c = 100 + i % 50, b = i % 2 == 0 ? 1 : 4;
      fit.Observe(c, b, b == 1 ? kTruth.Predict(c, b) : 3 * kTruth.Predict(c, b));
    }
    if (!with_prior) {
      ASSERT_TRUE(fit.current().has_value());
      EXPECT_GT(fit.current()->coefficients.gamma, 10 * kTruth.gamma);
    }
    // Then only 1-token steps, a whole window of them.
    for (int i = 0; i < 256; ++i) {
      const double c = 100 + i % 50;
      fit.Observe(c, 1, Noisy(kTruth.Predict(c, 1), rng));
    }
    ASSERT_TRUE(fit.current().has_value());
    const double gamma = fit.current()->coefficients.gamma;
    if (with_prior) {
      EXPECT_NEAR(gamma, kTruth.gamma, 0.25 * kTruth.gamma);
      EXPECT_NEAR(fit.current()->coefficients.Predict(120, 1), kTruth.Predict(120, 1),
                  0.05 * kTruth.Predict(120, 1));
    } else {
      EXPECT_GT(gamma, 10 * kTruth.gamma);  // stuck
    }
  }
}

// A wrong prior does not hold back a window that varies batch sizes and contexts: with gamma
// and alpha 200% too high and delta a third of the truth, its 12 points among 512 steps move
// the fit by at most 15% (the price of not locking in, above).
TEST(OnlineFitTest, AWindowThatVariesOutweighsAWrongPrior) {
  OnlineForwardFit fit;
  fit.SetPrior({kTruth.alpha * 3, kTruth.gamma * 3, kTruth.delta / 3});
  std::mt19937_64 rng(6);
  ObserveVariedSteps(fit, rng, 2000);
  ASSERT_TRUE(fit.current().has_value());
  const ForwardCoefficients& got = fit.current()->coefficients;
  EXPECT_NEAR(got.gamma, kTruth.gamma, 0.15 * kTruth.gamma);
  EXPECT_NEAR(got.delta, kTruth.delta, 0.15 * kTruth.delta);
  EXPECT_TRUE(fit.Describe().contains("prior"));
}

}  // namespace
}  // namespace splitspec::router
