// Acceptance estimators: the MLE, window, EMA, per-request prior, staleness.
#include "router/acceptance.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::router {
namespace {

TEST(AcceptanceTest, MleCountsAcceptedTokensAgainstRejections) {
  // Accepted 2 of 4 (one rejection), 4 of 4 (none), 0 of 2 (one): b = 6 / (6 + 2).
  const std::vector<Verification> v = {{4, 2}, {4, 4}, {2, 0}};
  EXPECT_DOUBLE_EQ(*MleOf(v), 0.75);
  // All accepted: capped, never 1.
  EXPECT_DOUBLE_EQ(*MleOf(std::vector<Verification>{{5, 5}, {3, 3}}), kAcceptanceCap);
  EXPECT_FALSE(MleOf(std::vector<Verification>{{0, 0}}).has_value());
  EXPECT_DOUBLE_EQ(CappedMle(0, 0, 0.98, 0.4), 0.4);
}

TEST(AcceptanceTest, WindowPoolsTheLastStepsOnly) {
  WindowEstimator w(2, kAcceptanceCap);
  EXPECT_FALSE(w.Estimate().has_value());
  w.ObserveStep(std::vector<Verification>{{4, 0}});  // 0 accepted, 1 rejection
  w.ObserveStep(std::vector<Verification>{{4, 1}});  // 1 accepted, 1 rejection
  EXPECT_DOUBLE_EQ(*w.Estimate(), 1.0 / 3.0);
  w.ObserveStep(std::vector<Verification>{{4, 3}, {2, 2}});  // the first step leaves the window
  EXPECT_DOUBLE_EQ(*w.Estimate(), 6.0 / 8.0);
  w.ObserveStep(std::vector<Verification>{});  // a step without drafts changes nothing
  EXPECT_DOUBLE_EQ(*w.Estimate(), 6.0 / 8.0);
  w.ObserveStep(std::vector<Verification>{{3, 3}});
  w.ObserveStep(std::vector<Verification>{{3, 3}});
  EXPECT_DOUBLE_EQ(*w.Estimate(), kAcceptanceCap);  // no rejection in the window: capped
}

// One request per step (a lone client): the window must still find the per-token rate. The
// mean of the steps' own rates would not: at a = 0.7 and k = 3 it is 0.54.
TEST(AcceptanceTest, WindowIsUnbiasedWithOneRequestPerStep) {
  constexpr double kRate = 0.7;
  constexpr int32_t kDraft = 3;
  WindowEstimator w(4000, kAcceptanceCap);
  std::mt19937_64 rng(7);
  std::bernoulli_distribution accept(kRate);
  double mean_of_step_rates = 0;
  constexpr int kSteps = 4000;
  for (int i = 0; i < kSteps; ++i) {
    int32_t accepted = 0;
    while (accepted < kDraft && accept(rng)) ++accepted;
    const Verification v{kDraft, accepted};
    w.ObserveStep(std::vector<Verification>{v});
    mean_of_step_rates += *MleOf(std::vector<Verification>{v}) / kSteps;
  }
  EXPECT_NEAR(*w.Estimate(), kRate, 0.02);
  EXPECT_LT(mean_of_step_rates, kRate - 0.1);  // the estimator this one replaces
}

TEST(AcceptanceTest, EmaSmoothsStepRates) {
  EmaEstimator e(0.5, kAcceptanceCap);
  e.ObserveStep(std::vector<Verification>{{4, 1}});  // 0.5 (first value taken as is)
  e.ObserveStep(std::vector<Verification>{{4, 3}});  // 0.75
  EXPECT_DOUBLE_EQ(*e.Estimate(), 0.625);
}

TEST(AcceptanceTest, MleEstimatorKeepsTheLastHVerifications) {
  MleEstimator m(2, kAcceptanceCap);
  m.ObserveStep(std::vector<Verification>{{4, 0}, {4, 1}, {4, 3}});
  // Only {4,1} and {4,3} remain: 4 / (4 + 2).
  EXPECT_DOUBLE_EQ(*m.Estimate(), 4.0 / 6.0);
}

TEST(AcceptanceTest, MakeEstimatorValidates) {
  EXPECT_TRUE(MakeEstimator({"window", 4, 0.2, 8, 0.98}).ok());
  EXPECT_FALSE(MakeEstimator({"bogus", 4, 0.2, 8, 0.98}).ok());
  EXPECT_FALSE(MakeEstimator({"ema", 4, 0.0, 8, 0.98}).ok());
  EXPECT_FALSE(ParseAcceptanceConfig({{"acceptance", {{"window", "x"}}}}).ok());
  auto c = ParseAcceptanceConfig({{"acceptance", {{"estimator", "mle"}, {"history", 5}}}});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->global.kind, "mle");
  EXPECT_EQ(c->global.history, 5);
}

TEST(AcceptanceTest, TrackerUsesThePoolAsPriorForRequests) {
  AcceptanceConfig config;
  config.global.kind = "mle";
  config.global.history = 100;
  config.request_prior_weight = 4;
  AcceptanceTracker t(config);
  EXPECT_DOUBLE_EQ(t.Global(), config.initial_acceptance);
  // Pool "a": request 1 accepts everything often, request 2 rejects at once.
  for (int i = 0; i < 10; ++i) {
    t.ObserveStep({{1, "a", {4, 4}}, {2, "a", {4, 0}}});
  }
  const double pool = t.Pool("a");
  // MLE 40 / 50 over 20 verifications, with the 0.6 prior worth 4 verifications.
  EXPECT_NEAR(pool, (20 * 0.8 + 4 * 0.6) / 24, 1e-12);
  EXPECT_GT(t.Request(1, "a"), pool);
  EXPECT_LT(t.Request(2, "a"), pool);
  // A request never seen on the pool starts at the pool's estimate.
  EXPECT_DOUBLE_EQ(t.Request(3, "a"), pool);
  // Request 2's own window (8) is all rejections: (0 + 4 * pool) / (8 + 4).
  EXPECT_NEAR(t.Request(2, "a"), 4 * pool / 12.0, 1e-12);
  EXPECT_EQ(t.RequestVerifications(1, "a"), 10);
  t.Forget(1);
  EXPECT_EQ(t.RequestVerifications(1, "a"), 0);
  EXPECT_DOUBLE_EQ(t.Request(1, "a"), t.Pool("a"));
  // An unknown pool falls back to the global estimate; accept length counts the bonus token.
  EXPECT_DOUBLE_EQ(t.Pool("b"), t.Global());
  EXPECT_DOUBLE_EQ(t.MeanAcceptLength(), (5.0 + 1.0) / 2.0);
}

TEST(AcceptanceTest, LittleEvidenceLeansOnThePrior) {
  AcceptanceTracker t;  // prior 0.6 worth 4 verifications
  t.ObserveStep({{1, "a", {2, 0}}});
  EXPECT_NEAR(t.Pool("a"), (1 * 0.0 + 4 * 0.6) / 5, 1e-12);
  EXPECT_NEAR(t.Global(), (1 * 0.0 + 4 * 0.6) / 5, 1e-12);
}

TEST(AcceptanceTest, StaleEstimatesDriftBackToThePrior) {
  AcceptanceConfig config;
  config.stale_after_steps = 10;
  config.initial_acceptance = 0.6;
  config.request_prior_weight = 0;  // no prior pull, only staleness
  AcceptanceTracker t(config);
  t.ObserveStep({{1, "a", {4, 0}}});
  EXPECT_DOUBLE_EQ(t.Pool("a"), 0.0);
  for (int i = 0; i < 10; ++i) t.ObserveStep({});
  EXPECT_DOUBLE_EQ(t.Pool("a"), 0.0);  // not stale yet
  for (int i = 0; i < 5; ++i) t.ObserveStep({});
  EXPECT_NEAR(t.Pool("a"), 0.3, 1e-12);  // halfway back
  for (int i = 0; i < 20; ++i) t.ObserveStep({});
  EXPECT_NEAR(t.Pool("a"), 0.6, 1e-12);
}

}  // namespace
// A copy holds the same estimates and learns apart from its original, whatever the estimator:
// the copy's next step is the step a tracker that saw everything took, and the original's
// estimates stay as they were.
TEST(AcceptanceTest, ACopiedTrackerLearnsApartFromItsOriginal) {
  for (const char* kind : {"window", "ema", "mle"}) {
    AcceptanceConfig config;
    config.global.kind = kind;
    config.stale_after_steps = 3;
    AcceptanceTracker original(config), whole(config);
    const std::vector<AcceptanceTracker::Observation> first = {{1, "a", {4, 3}}, {2, "b", {2, 0}}};
    const std::vector<AcceptanceTracker::Observation> second = {{1, "a", {4, 4}}, {3, "a", {3, 1}}};
    for (int i = 0; i < 5; ++i) {
      original.ObserveStep(first);
      whole.ObserveStep(first);
    }
    const double pool_a = original.Pool("a"), pool_b = original.Pool("b"), request_1 = original.Request(1, "a");
    AcceptanceTracker copy = original;
    EXPECT_EQ(copy.Pool("a"), pool_a) << kind;
    EXPECT_EQ(copy.Request(2, "b"), original.Request(2, "b")) << kind;
    for (int i = 0; i < 4; ++i) {
      copy.ObserveStep(second);
      whole.ObserveStep(second);
    }
    for (const char* pool : {"a", "b"}) {
      EXPECT_EQ(copy.Pool(pool), whole.Pool(pool)) << kind << " " << pool;
      EXPECT_EQ(copy.PoolVerifications(pool), whole.PoolVerifications(pool)) << kind << " " << pool;
    }
    EXPECT_EQ(copy.Global(), whole.Global()) << kind;
    for (spec::RequestId id : {1, 2, 3}) EXPECT_EQ(copy.Request(id, "a"), whole.Request(id, "a")) << kind;
    EXPECT_EQ(copy.MeanAcceptLength(), whole.MeanAcceptLength()) << kind;
    EXPECT_NE(copy.Pool("a"), pool_a) << kind;  // the second steps moved it
    EXPECT_EQ(original.Pool("a"), pool_a) << kind;
    EXPECT_EQ(original.Pool("b"), pool_b) << kind;
    EXPECT_EQ(original.Request(1, "a"), request_1) << kind;
    EXPECT_EQ(original.RequestVerifications(3, "a"), 0) << kind;
    // Assigned over, a tracker takes the other's estimates whole.
    original = copy;
    EXPECT_EQ(original.Pool("a"), whole.Pool("a")) << kind;
  }
}

}  // namespace splitspec::router
