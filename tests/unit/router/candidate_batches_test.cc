// SmartSpec's candidate batches (router/candidate_batches.h): the prefix search against
// brute force over every prefix and every k vector, and the cases where a shorter prefix
// must (and must not) win.
#include "router/candidate_batches.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "router/goodput.h"
#include "router/latency_model.h"

namespace splitspec::router {
namespace {

// A model where context matters (large alpha), so random long contexts make short prefixes
// pay in a good share of the random cases.
LatencyModel ContextHeavyModel() {
  LatencyModel m;
  m.set_target({2e-6, 2e-4, 0.002});
  m.set_drafter("draft", DrafterCost{false, {2e-7, 3e-5, 0.001}, 0});
  m.set_drafter("ngram", DrafterCost{true, {}, 0.0005});
  m.set_rpc_seconds(0.0003);
  return m;
}

// Best goodput of prefix items[0, m) over all k vectors (per_request) or all uniform k.
double BruteForcePrefix(const LatencyModel& model, const std::vector<GoodputItem>& items,
                        int32_t m, int32_t v, bool per_request) {
  const std::vector<GoodputItem> prefix(items.begin(), items.begin() + m);
  GoodputModel g(model, prefix, v);
  double best = 0;
  if (!per_request) {
    for (int32_t x = 0; x <= v; ++x) {
      std::vector<int32_t> k(m, 0);
      for (int32_t i = 0; i < m; ++i) k[i] = prefix[i].speculative ? x : 0;
      best = std::max(best, g.Goodput(k));
    }
    return best;
  }
  std::vector<int32_t> k(m, 0);
  while (true) {
    best = std::max(best, g.Goodput(k));
    int32_t i = 0;
    for (; i < m; ++i) {
      if (k[i] < (prefix[i].speculative ? v : 0)) {
        ++k[i];
        break;
      }
      k[i] = 0;
    }
    if (i == m) break;
  }
  return best;
}

class PrefixBruteForceTest : public ::testing::TestWithParam<bool> {};

TEST_P(PrefixBruteForceTest, MatchesBruteForceOverPrefixesAndK) {
  const bool per_request = GetParam();
  const LatencyModel model = ContextHeavyModel();
  std::mt19937_64 rng(per_request ? 7 : 8);
  std::uniform_real_distribution<double> acc(0.05, 0.98);
  std::uniform_int_distribution<int> ctx(1, 4000), n_dist(1, 5), v_dist(0, 3), pool(0, 2);
  // Drafter catch-up (some past what is charged in full, spread over 0-40 tokens left) in
  // every other trial.
  std::uniform_int_distribution<int> catch_up(0, 3 * kCatchUpChargedInFull), left(0, 40);
  int shorter = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<GoodputItem> items;
    const int n = n_dist(rng);
    for (int i = 0; i < n; ++i) {
      const int p = pool(rng);
      items.push_back({ctx(rng), acc(rng), p == 1 ? "ngram" : "draft", p != 2,
                       trial % 2 == 1 ? catch_up(rng) : 0, left(rng)});
    }
    const int v = v_dist(rng);
    const int min_size = std::uniform_int_distribution<int>(0, n)(rng);
    const BatchChoice c = BestFcfsPrefix(model, items, v, min_size, per_request);
    ASSERT_GE(c.size, std::max(1, min_size));
    ASSERT_LE(c.size, n);
    ASSERT_EQ(c.k.size(), items.size());
    for (int i = 0; i < n; ++i) {
      EXPECT_GE(c.k[i], 0);
      EXPECT_LE(c.k[i], i < c.size && items[i].speculative ? v : 0) << "trial " << trial;
    }
    if (!per_request) {  // one k for every speculative request of the prefix
      int32_t uniform = -1;
      for (int i = 0; i < c.size; ++i) {
        if (!items[i].speculative) continue;
        if (uniform < 0) uniform = c.k[i];
        EXPECT_EQ(c.k[i], uniform) << "trial " << trial;
      }
    }
    // The reported goodput is the prefix's real goodput for the chosen k ...
    GoodputModel chosen(model, std::vector<GoodputItem>(items.begin(), items.begin() + c.size), v);
    EXPECT_NEAR(c.goodput,
                chosen.Goodput(std::vector<int32_t>(c.k.begin(), c.k.begin() + c.size)),
                1e-12 * c.goodput);
    // ... and the best over every allowed prefix and every k.
    double brute = 0;
    int32_t brute_size = 0;
    for (int32_t m = n; m >= std::max(1, min_size); --m) {
      const double g = BruteForcePrefix(model, items, m, v, per_request);
      if (g > brute * (1 + 1e-9)) {
        brute = g;
        brute_size = m;
      }
    }
    EXPECT_NEAR(c.goodput, brute, 1e-9 * brute) << "trial " << trial;
    EXPECT_EQ(c.size, brute_size) << "trial " << trial;
    if (c.size < n) ++shorter;
  }
  // The random cases do exercise the search (not only the whole batch).
  EXPECT_GT(shorter, 40);
}

// Larger batches than brute force can enumerate: the one-pass search against solving every
// prefix on its own with the (separately brute-force-tested) single-batch optimisers.
TEST_P(PrefixBruteForceTest, MatchesPerPrefixOptimisersOnLargerBatches) {
  const bool per_request = GetParam();
  const LatencyModel model = ContextHeavyModel();
  std::mt19937_64 rng(per_request ? 17 : 18);
  std::uniform_real_distribution<double> acc(0.05, 0.98);
  std::uniform_int_distribution<int> ctx(1, 4000), n_dist(1, 24), v_dist(0, 8), pool(0, 2);
  for (int trial = 0; trial < 150; ++trial) {
    std::vector<GoodputItem> items;
    const int n = n_dist(rng);
    for (int i = 0; i < n; ++i) {
      const int p = pool(rng);
      items.push_back({ctx(rng), acc(rng), p == 1 ? "ngram" : "draft", p != 2});
    }
    const int v = v_dist(rng);
    const int min_size = std::uniform_int_distribution<int>(1, n)(rng);
    double best = 0;
    for (int m = n; m >= min_size; --m) {
      GoodputModel g(model, std::vector<GoodputItem>(items.begin(), items.begin() + m), v);
      best = std::max(best, g.Goodput(per_request ? g.BestPerRequest() : g.BestUniform()));
    }
    const BatchChoice c = BestFcfsPrefix(model, items, v, min_size, per_request);
    EXPECT_NEAR(c.goodput, best, 1e-9 * best) << "trial " << trial;
  }
}

INSTANTIATE_TEST_SUITE_P(Granularity, PrefixBruteForceTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "PerRequest" : "Uniform"; });

TEST(CandidateBatchesTest, UniformKIsOneValueOverTheSpeculativePrefix) {
  const LatencyModel model;  // A100 figures: speculation pays at small batches
  std::vector<GoodputItem> items(3, GoodputItem{200, 0.8, "default", true});
  items[1].speculative = false;
  const BatchChoice c = BestFcfsPrefix(model, items, 6, 1, /*per_request=*/false);
  EXPECT_EQ(c.size, 3);
  EXPECT_GT(c.k[0], 0);
  EXPECT_EQ(c.k[1], 0);
  EXPECT_EQ(c.k[2], c.k[0]);
}

// Target cost dominated by context (alpha): a request whose context is 50x the others'
// costs more per expected token than the rest of the batch averages.
LatencyModel ExpensiveContextModel() {
  LatencyModel m;
  m.set_target({1e-5, 1e-4, 1e-3});
  m.set_drafter("default", DrafterCost{false, {0, 1e-5, 1e-4}, 0});
  m.set_rpc_seconds(0);
  return m;
}

TEST(CandidateBatchesTest, ShorterPrefixWinsWhenTheTailCostsMoreThanItYields) {
  const LatencyModel model = ExpensiveContextModel();
  const std::vector<GoodputItem> items = {
      {100, 0.5, "default", true}, {100, 0.5, "default", true}, {100, 0.5, "default", true},
      {5000, 0.5, "default", true}};
  for (bool per_request : {false, true}) {
    const BatchChoice c = BestFcfsPrefix(model, items, 4, 1, per_request);
    EXPECT_EQ(c.size, 3) << per_request;
    EXPECT_EQ(c.k[3], 0);
    // By hand, k = 0: 3 tokens / (1e-3 + 300e-5 + 3e-4) beats 4 / (1e-3 + 5300e-5 + 4e-4).
    GoodputModel whole(model, items, 4);
    const std::vector<int32_t> whole_k = per_request ? whole.BestPerRequest() : whole.BestUniform();
    EXPECT_GT(c.goodput, 5 * whole.Goodput(whole_k));
  }
}

TEST(CandidateBatchesTest, WholeBatchWhenNoPrefixPays) {
  const LatencyModel model = ExpensiveContextModel();
  // Equal contexts: with delta > 0 every extra request lowers the step's cost per token.
  const std::vector<GoodputItem> same(4, GoodputItem{100, 0.5, "default", true});
  // The long context first: every prefix contains it, and adding the short ones only helps.
  const std::vector<GoodputItem> long_first = {
      {5000, 0.5, "default", true}, {100, 0.5, "default", true}, {100, 0.5, "default", true}};
  for (bool per_request : {false, true}) {
    EXPECT_EQ(BestFcfsPrefix(model, same, 4, 1, per_request).size, 4);
    EXPECT_EQ(BestFcfsPrefix(model, long_first, 4, 1, per_request).size, 3);
  }
  // The A100 default with realistic contexts: the whole batch.
  const LatencyModel a100;
  std::vector<GoodputItem> mixed;
  for (int i = 0; i < 16; ++i) mixed.push_back({128 + 40 * i, 0.7, "default", true});
  EXPECT_EQ(BestFcfsPrefix(a100, mixed, 8, 1, false).size, 16);
}

TEST(CandidateBatchesTest, MinSizeKeepsMustRunRequestsIn) {
  const LatencyModel model = ExpensiveContextModel();
  const std::vector<GoodputItem> items = {
      {100, 0.5, "default", true}, {100, 0.5, "default", true}, {5000, 0.5, "default", true}};
  EXPECT_EQ(BestFcfsPrefix(model, items, 4, 1, false).size, 2);
  EXPECT_EQ(BestFcfsPrefix(model, items, 4, 3, false).size, 3);
  EXPECT_EQ(BestFcfsPrefix(model, items, 4, 99, false).size, 3);  // clamped to n
  EXPECT_EQ(BestFcfsPrefix(model, {}, 4, 1, false).size, 0);
}

}  // namespace
}  // namespace splitspec::router
