#include "router/draft_correction.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "router/latency_model.h"

namespace splitspec::router {
namespace {

// A drafter whose calls cost 0.3 ms beyond their forwards, which run at 0.75x the profile's
// line: what a 2-layer draft on one H200 looked like against its profile.
constexpr double kTrueCallSeconds = 3e-4;
constexpr double kTrueScale = 0.75;
double TrueDraftSeconds(double line) { return kTrueCallSeconds + kTrueScale * line; }

TEST(DraftCorrectionTest, StartsAtThePriorScaleWithNoPerCallTime) {
  const DraftCorrection c(1.3);
  EXPECT_DOUBLE_EQ(c.scale(), 1.3);
  EXPECT_DOUBLE_EQ(c.per_call_seconds(), 0.0);
  EXPECT_DOUBLE_EQ(c.Predict(0.002), 1.3 * 0.002);
  EXPECT_DOUBLE_EQ(c.Predict(0.0), 0.0);
  EXPECT_DOUBLE_EQ(DraftCorrection(50).scale(), DraftCorrection::kMaxScale);
  EXPECT_DOUBLE_EQ(DraftCorrection(NAN).scale(), 1.0);
}

TEST(DraftCorrectionTest, LearnsThePerCallTimeFromCallsOfSeveralDepths) {
  DraftCorrection c(1.0);
  const double forward = 2e-4;  // the line of one forward
  for (int i = 0; i < 400; ++i) {
    const double line = forward * (1 + i % 4);  // depths 1, 2, 3, 4 by turns
    c.Observe(line, TrueDraftSeconds(line));
  }
  EXPECT_NEAR(c.per_call_seconds(), kTrueCallSeconds, 0.05 * kTrueCallSeconds);
  EXPECT_NEAR(c.scale(), kTrueScale, 0.05 * kTrueScale);
  for (int depth = 1; depth <= 6; ++depth) {
    const double line = forward * depth;
    EXPECT_NEAR(c.Predict(line), TrueDraftSeconds(line), 0.03 * TrueDraftSeconds(line)) << depth;
  }
}

// Calls that all have the same line cannot tell a per-call time from a scale: the fit then
// goes through the origin, the one-parameter correction it replaced, and prices that line right.
TEST(DraftCorrectionTest, CallsOfOneLineLearnAScale) {
  DraftCorrection c(1.0);
  for (int i = 0; i < 200; ++i) c.Observe(0.001, 0.0016);
  EXPECT_NEAR(c.scale(), 1.6, 0.01);
  EXPECT_NEAR(c.per_call_seconds(), 0.0, 1e-6);
  EXPECT_NEAR(c.Predict(0.001), 0.0016, 1e-5);
}

// The first calls move the correction gradually, and once it has learnt, one call 5x slower
// than the rest (a descheduled worker) moves its predictions little.
TEST(DraftCorrectionTest, OneCallMovesItLittle) {
  DraftCorrection fresh(1.0);
  fresh.Observe(0.001, 0.003);
  EXPECT_GT(fresh.scale(), 1.0);
  EXPECT_LT(fresh.Predict(0.001), 1.2 * 0.001);

  DraftCorrection c(1.0);
  for (int i = 0; i < 400; ++i) {
    const double line = 2e-4 * (1 + i % 4);
    c.Observe(line, TrueDraftSeconds(line));
  }
  const double before = c.Predict(6e-4);
  c.Observe(6e-4, 5 * TrueDraftSeconds(6e-4));
  EXPECT_LT(std::fabs(c.Predict(6e-4) - before), 0.1 * before);  // one 5x call in ~20: at most 2x counts
  // A drafter that stays 3x slower is followed.
  for (int i = 0; i < 100; ++i) c.Observe(6e-4, 3 * TrueDraftSeconds(6e-4));
  EXPECT_NEAR(c.Predict(6e-4), 3 * TrueDraftSeconds(6e-4), 0.05 * 3 * TrueDraftSeconds(6e-4));
}

TEST(DraftCorrectionTest, IgnoresCallsWithoutAMeasurement) {
  DraftCorrection c(2.0);
  c.Observe(0.001, 0.0);
  c.Observe(0.0, 0.001);
  c.Observe(0.001, NAN);
  c.Observe(INFINITY, 0.001);
  EXPECT_DOUBLE_EQ(c.scale(), 2.0);
  EXPECT_DOUBLE_EQ(c.per_call_seconds(), 0.0);
}

// Through the latency model, the mix smartspec drafted on the H200: mostly depth-1 calls, a
// few of depth 3. The 3-token chain it did not choose is priced within 10% of what it costs,
// where calls of depth 1 alone, which leave one scale, overprice it by more than 30%.
TEST(DraftCorrectionTest, LatencyModelPricesAChainAfterLearningShallowCalls) {
  LatencyModel m;
  const ForwardCoefficients line{0, 0, 2e-4};  // 0.2 ms a forward whatever its size
  m.set_drafter("d", DrafterCost{false, line, 0});
  const std::vector<int32_t> ctx = {100};
  for (int i = 0; i < 300; ++i) {
    const int32_t depth = i % 8 == 0 ? 3 : 1;
    const double raw = depth * line.delta;
    m.ObserveDraft("d", ctx, {depth}, TrueDraftSeconds(raw));
  }
  const double chain = m.DraftSeconds("d", ctx, {3});
  const double chain_cost = TrueDraftSeconds(3 * line.delta);
  EXPECT_NEAR(chain, chain_cost, 0.1 * chain_cost);
  EXPECT_NEAR(m.DraftSeconds("d", ctx, {1}), TrueDraftSeconds(line.delta), 0.1 * TrueDraftSeconds(line.delta));
  EXPECT_GT(m.draft_call_seconds("d"), 0.5 * kTrueCallSeconds);
  // The same calls of depth 1 alone cannot separate the per-call time: the correction is then
  // one scale, and prices the chain as three of them.
  LatencyModel shallow_only;
  shallow_only.set_drafter("d", DrafterCost{false, line, 0});
  for (int i = 0; i < 300; ++i) shallow_only.ObserveDraft("d", ctx, {1}, TrueDraftSeconds(line.delta));
  EXPECT_GT(shallow_only.DraftSeconds("d", ctx, {3}), 1.3 * chain_cost);
  EXPECT_NE(m.Summary().find("a call"), std::string::npos) << m.Summary();
}

}  // namespace
}  // namespace splitspec::router
