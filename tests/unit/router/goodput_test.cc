// Goodput: the exact per-request optimiser against brute force; regime checks.
#include "router/goodput.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "router/expected_length.h"

namespace splitspec::router {
namespace {

// Best goodput over every k vector in [0, v]^n (k forced to 0 for non-speculative items).
double BruteForceBest(const GoodputModel& g, const std::vector<GoodputItem>& items, int v) {
  const size_t n = items.size();
  std::vector<int32_t> k(n, 0);
  double best = 0;
  while (true) {
    best = std::max(best, g.Goodput(k));
    size_t i = 0;
    while (i < n) {
      const int limit = items[i].speculative ? v : 0;
      if (k[i] < limit) {
        ++k[i];
        break;
      }
      k[i] = 0;
      ++i;
    }
    if (i == n) break;
  }
  return best;
}

LatencyModel TwoPoolModel() {
  LatencyModel m;
  m.set_target({1e-6, 2e-4, 0.010});
  m.set_drafter("draft", DrafterCost{false, {2e-7, 3e-5, 0.002}, 0});
  m.set_drafter("ngram", DrafterCost{true, {}, 0.0015});
  m.set_rpc_seconds(0.0003);
  return m;
}

TEST(GoodputTest, StepSecondsFollowsTheLinearModel) {
  const LatencyModel m = TwoPoolModel();
  GoodputModel g(m, {{100, 0.7, "draft", true}, {50, 0.5, "draft", true}}, 4);
  const std::vector<int32_t> k = {2, 1};
  // Target: 150 context tokens, (2+1) + (1+1) = 5 batched; draft: 2 forwards, the first
  // over both requests (contexts 100 and 50), the second over the first only (context 101).
  const double target = 1e-6 * 150 + 2e-4 * 5 + 0.010;
  const double draft = (2e-7 * 150 + 3e-5 * 2 + 0.002) + (2e-7 * 101 + 3e-5 * 1 + 0.002);
  EXPECT_NEAR(g.StepSeconds(k), target + draft + 2 * 0.0003, 1e-12);
  EXPECT_NEAR(g.ExpectedTokens(k), ExpectedChainLength(0.7, 2) + ExpectedChainLength(0.5, 1),
              1e-12);
}

// A request whose drafter must first feed tokens it skipped pays them in its pool's draft time
// (draft gamma per token): kCatchUpChargedInFull in full, the rest spread over the steps it has
// left; a model-free drafter feeds nothing.
TEST(GoodputTest, DraftCatchUpIsChargedToTheRequestsThatDraft) {
  const LatencyModel m = TwoPoolModel();
  const std::vector<GoodputItem> steady = {{100, 0.7, "draft", true}, {50, 0.5, "ngram", true}};
  std::vector<GoodputItem> behind = steady;
  behind[0].draft_catch_up = 3;
  behind[1].draft_catch_up = 3;
  const std::vector<int32_t> k = {2, 1};
  auto extra = [&](const std::vector<GoodputItem>& items) {
    return GoodputModel(m, items, 4).StepSeconds(k) - GoodputModel(m, steady, 4).StepSeconds(k);
  };
  EXPECT_NEAR(extra(behind), 3 * 3e-5, 1e-12);
  // A drafter prefill: in full while the tokens left are unknown, else spread over the steps
  // left at k = 1 (170 tokens at a = 0.7: 100 steps).
  behind[0].draft_catch_up = 500;
  EXPECT_NEAR(extra(behind), 500 * 3e-5, 1e-12);
  behind[0].remaining_tokens = 170;
  EXPECT_NEAR(ChargedCatchUpTokens(behind[0]), kCatchUpChargedInFull + (500.0 - kCatchUpChargedInFull) / 100, 1e-12);
  EXPECT_NEAR(extra(behind), ChargedCatchUpTokens(behind[0]) * 3e-5, 1e-12);
  // Nothing is charged to a request that does not draft.
  EXPECT_NEAR(GoodputModel(m, behind, 4).StepSeconds({0, 1}), GoodputModel(m, steady, 4).StepSeconds({0, 1}),
              1e-12);
}

// The hysteresis the charge is for: a batch where drafting one token barely pays in the steady
// state stays plain once its drafter has fallen behind, so it does not toggle between the two.
TEST(GoodputTest, CatchUpKeepsABorderlineBatchFromToggling) {
  LatencyModel m;
  m.set_target({0, 2e-4, 0.0025});
  m.set_drafter("draft", DrafterCost{false, {0, 2.5e-4, 0}, 0});
  m.set_rpc_seconds(0.0003);
  std::vector<GoodputItem> items(4, GoodputItem{300, 0.6, "draft", true});
  const GoodputModel steady(m, items, 4);
  ASSERT_GT(steady.Goodput({1, 1, 1, 1}), steady.Goodput({0, 0, 0, 0}));  // drafting pays, a little
  EXPECT_GE(steady.BestUniform()[0], 1);
  for (GoodputItem& it : items) it.draft_catch_up = 1;  // one plain step behind
  const GoodputModel behind(m, items, 4);
  for (int32_t k : behind.BestUniform()) EXPECT_EQ(k, 0);
  for (int32_t k : behind.BestPerRequest()) EXPECT_EQ(k, 0);
  // After a long pause (a drafter prefill of 400 tokens) a clear gain still resumes drafting
  // when the request has enough left to win the prefill back, and not near its end.
  std::vector<GoodputItem> easy(1, GoodputItem{300, 0.9, "draft", true, 400, 200});
  EXPECT_GE(GoodputModel(m, easy, 4).BestPerRequest()[0], 2);
  easy[0].remaining_tokens = 10;
  EXPECT_EQ(GoodputModel(m, easy, 4).BestPerRequest()[0], 0);
}

// The catch-up charge makes a request's first draft token dearer than the next ones: here the
// first alone loses, four together win clearly. The exact optimisers must still find it.
TEST(GoodputTest, FindsDraftingThatPaysOnlyPastTheDearFirstToken) {
  LatencyModel m;
  m.set_target({0, 1e-4, 0.003});
  m.set_drafter("draft", DrafterCost{false, {0, 3.5e-4, 0}, 0});
  m.set_rpc_seconds(1e-4);
  const std::vector<GoodputItem> items = {{300, 0.9, "draft", true, kCatchUpChargedInFull}};
  const GoodputModel g(m, items, 6);
  ASSERT_LT(g.Goodput({1}), g.Goodput({0}));
  const double brute = BruteForceBest(g, items, 6);
  EXPECT_GT(brute, 1.5 * g.Goodput({0}));
  EXPECT_NEAR(g.Goodput(g.BestPerRequest()), brute, 1e-9 * brute);
  EXPECT_NEAR(g.BestPrefix(1, /*per_request=*/true).goodput, brute, 1e-9 * brute);
  EXPECT_NEAR(g.BestPrefix(1, /*per_request=*/false).goodput, brute, 1e-9 * brute);
}

// With the pipeline hiding half of the drafting behind verification, a step waits for half of
// the draft time, in the step time and in the exact optimiser's costs alike.
TEST(GoodputTest, DraftExposureScalesTheDraftCost) {
  LatencyModel m = TwoPoolModel();
  const std::vector<GoodputItem> items = {{100, 0.7, "draft", true}, {50, 0.5, "draft", true}};
  const std::vector<int32_t> k = {2, 1};
  const double serial = GoodputModel(m, items, 4).StepSeconds(k);
  for (int i = 0; i < 200; ++i) m.ObserveDraftExposure(0.5);
  EXPECT_NEAR(m.draft_exposure(), 0.5, 1e-6);
  GoodputModel g(m, items, 4);
  const double target = 1e-6 * 150 + 2e-4 * 5 + 0.010;
  const double draft = (2e-7 * 150 + 3e-5 * 2 + 0.002) + (2e-7 * 101 + 3e-5 * 1 + 0.002);
  EXPECT_NEAR(serial - g.StepSeconds(k), 0.5 * draft, 1e-9);
  EXPECT_NEAR(g.StepSeconds(k), target + 0.5 * draft + 2 * 0.0003, 1e-9);
  EXPECT_NEAR(g.Goodput(g.BestPerRequest()), BruteForceBest(g, items, 4), 1e-9);
  // Cheaper drafting never makes the best proposals shorter.
  const std::vector<int32_t> before = GoodputModel(TwoPoolModel(), items, 4).BestPerRequest();
  const std::vector<int32_t> after = g.BestPerRequest();
  for (size_t i = 0; i < items.size(); ++i) EXPECT_GE(after[i], before[i]);
}

TEST(GoodputTest, PerRequestOptimumMatchesBruteForce) {
  const LatencyModel m = TwoPoolModel();
  std::mt19937_64 rng(123);
  std::uniform_real_distribution<double> acc(0.05, 0.98);
  std::uniform_int_distribution<int> ctx(1, 3000), n_dist(1, 4), v_dist(1, 4), pool(0, 2);
  // Drafter catch-up (some past what is charged in full) in every other trial: the charge
  // makes a request's cost non-convex in k, which the optimiser must still get exactly right.
  std::uniform_int_distribution<int> catch_up(0, 3 * kCatchUpChargedInFull), left(0, 40);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<GoodputItem> items;
    const int n = n_dist(rng);
    for (int i = 0; i < n; ++i) {
      const int p = pool(rng);
      items.push_back({ctx(rng), acc(rng), p == 1 ? "ngram" : "draft", p != 2 || i == 0,
                       trial % 2 == 1 ? catch_up(rng) : 0, left(rng)});
    }
    const int v = v_dist(rng);
    GoodputModel g(m, items, v);
    const std::vector<int32_t> k = g.BestPerRequest();
    ASSERT_EQ(k.size(), items.size());
    for (size_t i = 0; i < k.size(); ++i) {
      EXPECT_GE(k[i], 0);
      EXPECT_LE(k[i], items[i].speculative ? v : 0);
    }
    const double brute = BruteForceBest(g, items, v);
    EXPECT_NEAR(g.Goodput(k), brute, 1e-9 * brute) << "trial " << trial;
  }
}

TEST(GoodputTest, UniformOptimumMatchesEnumeration) {
  const LatencyModel m = TwoPoolModel();
  std::vector<GoodputItem> items = {{500, 0.8, "draft", true}, {900, 0.6, "draft", true}};
  GoodputModel g(m, items, 6);
  const std::vector<int32_t> k = g.BestUniform();
  EXPECT_EQ(k[0], k[1]);
  for (int x = 0; x <= 6; ++x) {
    EXPECT_GE(g.Goodput(k), g.Goodput(std::vector<int32_t>{x, x}) - 1e-12);
  }
}

TEST(GoodputTest, SmallBatchHighAcceptanceSpeculatesLargeBatchDoesNot) {
  const LatencyModel m;  // the built-in A100 7B / 160M figures
  GoodputModel small(m, {{256, 0.8, "default", true}}, 8);
  EXPECT_GE(small.BestUniform()[0], 2);
  EXPECT_GE(small.BestPerRequest()[0], 2);
  // At saturation the per-token term dominates: plain decoding has the best goodput.
  std::vector<GoodputItem> many(256, GoodputItem{256, 0.7, "default", true});
  GoodputModel big(m, many, 8);
  for (int32_t k : big.BestUniform()) EXPECT_EQ(k, 0);
  for (int32_t k : big.BestPerRequest()) EXPECT_EQ(k, 0);
}

TEST(GoodputTest, PerRequestGivesMoreToEasierRequests) {
  const LatencyModel m;
  std::vector<GoodputItem> items;
  for (int i = 0; i < 8; ++i) items.push_back({200, i < 4 ? 0.95 : 0.2, "default", true});
  GoodputModel g(m, items, 8);
  const std::vector<int32_t> k = g.BestPerRequest();
  for (int i = 0; i < 4; ++i) EXPECT_GT(k[i], k[4 + i]);
  EXPECT_GE(g.Goodput(k), g.Goodput(g.BestUniform()) - 1e-12);
}

}  // namespace
}  // namespace splitspec::router
