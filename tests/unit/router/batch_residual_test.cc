// BatchResidual: the per-batch-size correction of the latency line (router/batch_residual.h).
#include "router/batch_residual.h"

#include <cmath>

#include <gtest/gtest.h>

namespace splitspec::router {
namespace {

// A forward that costs its line up to 6 tokens and 40% more at 17, as a tiled CPU matmul does.
double ConvexCost(double n) { return n <= 6 ? 1.0 : (n >= 17 ? 1.4 : 1.0 + 0.4 * (n - 6) / 11); }

TEST(BatchResidualTest, NothingLearntOrALinearModelGivesOne) {
  BatchResidual r;
  EXPECT_EQ(r.Factor(1), 1.0);
  EXPECT_EQ(r.Factor(500), 1.0);
  for (int n = 1; n <= 40; ++n) {
    for (int i = 0; i < 3; ++i) r.Observe(n, 0.01 * n, 0.01 * n);
  }
  for (double n : {1.0, 7.0, 33.0, 1000.0}) EXPECT_NEAR(r.Factor(n), 1.0, 1e-12) << n;
}

TEST(BatchResidualTest, LearntSizesInterpolateBetweenAndHoldBeyond) {
  BatchResidual r;
  for (int i = 0; i < 10; ++i) {
    for (int n : {1, 2, 3, 4, 5, 17}) r.Observe(n, 0.01, 0.01 * ConvexCost(n));
  }
  EXPECT_NEAR(r.Factor(4), 1.0, 1e-12);
  EXPECT_NEAR(r.Factor(17), 1.4, 1e-9);
  // 11 was never seen: priced between the learnt 5 and 17, not at the line.
  const double at11 = r.Factor(11);
  EXPECT_GT(at11, 1.1);
  EXPECT_LT(at11, 1.3);
  EXPECT_NEAR(r.Factor(64), 1.4, 1e-9);  // beyond the largest learnt size: its factor
  EXPECT_NEAR(r.Factor(0.5), 1.0, 1e-12);
}

TEST(BatchResidualTest, OneStepTeachesNothingAndAStallIsClamped) {
  BatchResidual r;
  r.Observe(9, 0.01, 0.02);
  EXPECT_EQ(r.Factor(9), 1.0);  // a single observation is not a price yet
  r.Observe(9, 0.01, 0.02);
  EXPECT_NEAR(r.Factor(9), 2.0, 1e-9);
  // A step stalled 1000x (a page fault, a preempted worker) counts as at most 4x.
  for (int i = 0; i < 4; ++i) r.Observe(3, 0.01, 0.01);
  r.Observe(3, 0.01, 10.0);
  EXPECT_LT(r.Factor(3), std::exp(std::log(4.0) / 5) + 1e-9);
  // Bad figures are ignored.
  r.Observe(3, 0, 1);
  r.Observe(3, 1, std::nan(""));
  r.Observe(3, -1, 1);
  EXPECT_EQ(r.Describe()["3"]["steps"], 5);
}

TEST(BatchResidualTest, FollowsAMachineThatChanges) {
  BatchResidual r;
  for (int i = 0; i < 200; ++i) r.Observe(12, 0.01, 0.01);
  for (int i = 0; i < 100; ++i) r.Observe(12, 0.01, 0.02);
  EXPECT_GT(r.Factor(12), 1.9);  // the old 200 steps weigh (31/32)^100 = 4% now
  EXPECT_LE(r.Factor(12), 2.0 + 1e-9);
}

TEST(BatchResidualTest, BucketsStayBoundedAtAnyLoad) {
  BatchResidual r;
  for (double n = 1; n < 1e7; n *= 1.01) r.Observe(n, 1, 1);
  // 32 exact sizes, then 8 per octave: up to 1e7 tokens that is 32 + 8 * 19 buckets.
  EXPECT_LE(r.Describe().size(), 32u + 8u * 19u);
  EXPECT_GT(r.Describe().size(), 32u);
}

}  // namespace
}  // namespace splitspec::router
