// VerifySlowdown: what drafts made ahead beside a verify call add to it, learnt from the
// calls' compute against the latency model's predictions.
#include "router/verify_slowdown.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace splitspec::router {
namespace {

// A verify call's compute wanders a few per cent from step to step.
double VerifyCallWander(int step) { return 1.0 + 0.05 * std::sin(1.7 * step); }

// `steps` steps, each with drafts beside its verify call except every `alone_every`-th; the
// calls take `ratio` (and `slowdown` times that beside drafts) of the predicted 10 ms.
void ObserveSlowdownSteps(VerifySlowdown* s, int steps, int alone_every, double ratio, double slowdown, int first = 0) {
  for (int i = first; i < first + steps; ++i) {
    const bool beside = i % alone_every != 0;
    s->Observe(beside, 0.01 * ratio * (beside ? slowdown : 1.0) * VerifyCallWander(i), 0.01);
  }
}

TEST(VerifySlowdownTest, UnknownAndZeroUntilThreeCallsFollowedRunsOfTheOtherKind) {
  VerifySlowdown s;
  for (int i = 0; i < 50; ++i) s.Observe(true, 0.02, 0.01);
  EXPECT_FALSE(s.known());
  EXPECT_EQ(s.Extra(), 0.0);
  for (int probe = 0; probe < 3; ++probe) {
    EXPECT_FALSE(s.known()) << probe;
    s.Observe(false, 0.01, 0.01);
    for (int i = 0; i < VerifySlowdown::kFreshRun; ++i) s.Observe(true, 0.02, 0.01);
  }
  EXPECT_TRUE(s.known());
  EXPECT_NEAR(s.Extra(), 1.0, 1e-9);
}

TEST(VerifySlowdownTest, CallsOfBothKindsByTurnsCompareNothing) {
  VerifySlowdown s;
  for (int i = 0; i < 200; ++i) s.Observe(i % 2 == 0, i % 2 == 0 ? 0.02 : 0.01, 0.01);
  EXPECT_FALSE(s.known());
  EXPECT_EQ(s.Extra(), 0.0);
}

TEST(VerifySlowdownTest, LearnsTheSlowdownWhateverTheModelMisses) {
  for (const double ratio : {0.5, 1.0, 1.7}) {
    VerifySlowdown s;
    ObserveSlowdownSteps(&s, 400, 8, ratio, 1.4);
    EXPECT_NEAR(s.Extra(), 0.4, 0.04) << "observed / predicted " << ratio;
    EXPECT_EQ(s.Priced(), s.Extra());
  }
  // Below kPricedFrom it is reported but not priced.
  VerifySlowdown small;
  ObserveSlowdownSteps(&small, 400, 8, 1.0, 1.15);
  EXPECT_NEAR(small.Extra(), 0.15, 0.04);
  EXPECT_EQ(small.Priced(), 0.0);
}

TEST(VerifySlowdownTest, NoSlowdownGivesNearZeroAndNeverBelow) {
  VerifySlowdown s;
  ObserveSlowdownSteps(&s, 400, 8, 1.2, 1.0);
  EXPECT_TRUE(s.known());
  EXPECT_LT(s.Extra(), 0.03);
  VerifySlowdown faster;
  ObserveSlowdownSteps(&faster, 400, 8, 1.0, 0.8);
  EXPECT_EQ(faster.Extra(), 0.0);
}

TEST(VerifySlowdownTest, ARefitThatMovesEveryPredictionCancelsOut) {
  VerifySlowdown s;
  ObserveSlowdownSteps(&s, 400, 8, 1.0, 1.5);
  // The online refit has learnt the calls (mostly slowed ones): predictions 40% higher.
  ObserveSlowdownSteps(&s, 800, 8, 1.0 / 1.4, 1.5, 400);
  EXPECT_NEAR(s.Extra(), 0.5, 0.05);
}

TEST(VerifySlowdownTest, OneOutlierMovesItLittleAndALastingChangeIsFollowed) {
  VerifySlowdown s;
  ObserveSlowdownSteps(&s, 400, 8, 1.0, 1.5);
  const double before = s.Extra();
  s.Observe(true, 0.01 * 20, 0.01);  // a call that also waited for something else
  EXPECT_LT(std::abs(s.Extra() - before), 0.1);
  // The drafter moved onto the verifier's GPU: three times as long beside drafts from now on.
  ObserveSlowdownSteps(&s, 1600, 8, 1.0, 3.0, 401);
  EXPECT_NEAR(s.Extra(), 2.0, 0.15);
}

// The online refit follows the calls most steps make, so predictions move with the regime:
// first most calls have drafts beside them (three times as long), then, drafting ahead having
// stopped, most do not. Each rare call is compared with the run before it, so the slowdown
// stays what it is.
TEST(VerifySlowdownTest, PredictionsThatFollowTheCommonKindOfCallDoNotBiasIt) {
  VerifySlowdown s;
  double predicted = 0.01;
  auto call = [&](int step, bool beside) {
    const double observed = 0.01 * (beside ? 3.0 : 1.0) * VerifyCallWander(step);
    s.Observe(beside, observed, predicted);
    predicted = 0.9 * predicted + 0.1 * observed;  // as a refit learning every call
  };
  int step = 0;
  for (; step < 640; ++step) call(step, step % 32 != 0);
  EXPECT_NEAR(s.Extra(), 2.0, 0.2);
  for (; step < 640 + 4000; ++step) call(step, step % 200 == 0);
  EXPECT_NEAR(s.Extra(), 2.0, 0.2);
}

TEST(VerifySlowdownTest, IgnoresCallsWithoutAMeasurement) {
  VerifySlowdown s;
  ObserveSlowdownSteps(&s, 400, 8, 1.0, 1.5);
  const double before = s.Extra();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  s.Observe(true, 0.0, 0.01);
  s.Observe(true, 0.05, 0.0);
  s.Observe(false, nan, 0.01);
  s.Observe(false, 0.01, std::numeric_limits<double>::infinity());
  s.Observe(true, -1.0, 0.01);
  EXPECT_EQ(s.Extra(), before);
}

}  // namespace
}  // namespace splitspec::router
