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
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<GoodputItem> items;
    const int n = n_dist(rng);
    for (int i = 0; i < n; ++i) {
      const int p = pool(rng);
      items.push_back({ctx(rng), acc(rng), p == 1 ? "ngram" : "draft", p != 2 || i == 0});
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
