// Goodput: the exact per-request optimiser against brute force; regime checks.
#include "router/goodput.h"

#include <cmath>
#include <map>
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

// A drafter costing about a third of a target step per token, as an 8-bit copy of the target
// drafting for it would; one pool, a single request.
LatencyModel SelfDraftModel(bool pipeline) {
  LatencyModel m;
  m.set_target({2e-6, 7e-4, 0.0025});
  m.set_drafter("draft", DrafterCost{false, {1e-6, 5e-4, 0.0008}, 0});
  m.set_rpc_seconds(0.0005);
  m.set_pipeline(pipeline);
  return m;
}

// Without misses, a draft made ahead that fits inside the verify call costs the step nothing:
// not its compute and not its RPC.
TEST(GoodputTest, PipelineHidesADraftAheadThatFitsInTheVerify) {
  LatencyModel m = TwoPoolModel();  // drafting ~2 ms a level against a 10 ms verify
  m.set_pipeline(true);
  const std::vector<GoodputItem> items = {{100, 1.0, "draft", true}};
  GoodputModel g(m, items, 4);
  EXPECT_NEAR(g.StepSeconds({2}), m.TargetSeconds(100, 3) + m.RpcSeconds(), 1e-12);
  EXPECT_DOUBLE_EQ(g.Exposure(0, 2).draft, 0.0);
  EXPECT_DOUBLE_EQ(g.Exposure(0, 2).rpc, 0.0);
  // The deepest chain has no guess to draft ahead from: it is priced as serial.
  const LatencyModel serial_model = TwoPoolModel();  // GoodputModel keeps a reference
  const GoodputModel serial(serial_model, items, 4);
  EXPECT_NEAR(g.StepSeconds({4}), serial.StepSeconds({4}), 1e-12);
}

// A draft made ahead that also covers other outcomes is used more often (an alternative
// catches a share of the misses), so a step waits less often for a serial Propose; the extra
// chains drafted beside the verify call cost nothing while they fit in it. Greedy and sampled
// requests start from rescue rates of their own and learn them apart: misses seen for sampled
// requests leave a greedy one's price alone.
TEST(GoodputTest, AlternativesLetADraftMadeAheadLandMoreOften) {
  LatencyModel hypothesis_only_model = TwoPoolModel();  // drafting ~2 ms a level, a 10 ms verify
  hypothesis_only_model.set_pipeline(true);
  LatencyModel covering_model = hypothesis_only_model;
  covering_model.set_draft_ahead_alternatives(2);
  GoodputItem greedy{100, 0.9, "draft", true};
  GoodputItem sampled = greedy;
  sampled.greedy = false;
  const GoodputModel hypothesis_only(hypothesis_only_model, {greedy}, 4);
  const GoodputModel covering(covering_model, {greedy}, 4);
  const double miss = 1 - std::pow(0.9, 3);  // chain of 2 and its guess
  EXPECT_NEAR(hypothesis_only.Exposure(0, 2).rpc, miss, 1e-12);
  EXPECT_NEAR(covering.Exposure(0, 2).rpc, miss * (1 - kAlternativeRescuePrior), 1e-12);
  EXPECT_LT(covering.StepSeconds({2}), hypothesis_only.StepSeconds({2}));
  {
    const GoodputModel covering_sampled(covering_model, {sampled}, 4);
    EXPECT_NEAR(covering_sampled.Exposure(0, 2).rpc, miss * (1 - kSampledAlternativeRescuePrior), 1e-12);
  }
  // Sampled requests' alternatives seen to miss every time: their price falls back towards the
  // hypothesis alone, a greedy request's stays.
  for (int i = 0; i < 200; ++i) covering_model.ObserveAlternativeOutcome(/*held=*/false, /*greedy=*/false);
  EXPECT_LT(covering_model.alternative_rescue(/*greedy=*/false), 0.01);
  EXPECT_DOUBLE_EQ(covering_model.alternative_rescue(/*greedy=*/true), kAlternativeRescuePrior);
  const GoodputModel covering_sampled(covering_model, {sampled}, 4);
  const GoodputModel covering_greedy(covering_model, {greedy}, 4);
  EXPECT_NEAR(covering_sampled.Exposure(0, 2).rpc, miss, 0.01);
  EXPECT_NEAR(covering_greedy.Exposure(0, 2).rpc, miss * (1 - kAlternativeRescuePrior), 1e-12);
}

// Where the alternatives' extra chains would outlast the verify call that a chain alone fits
// in (one chain of 4 levels 1.6 ms, five of them 8 ms, beside a 5 ms verify call), the pool's
// drafts made ahead are priced with the hypothesis alone, as RouterCore::BestDraftAhead drafts
// them, rather than as five chains or as no draft ahead at all.
TEST(GoodputTest, AlternativesThatWouldOutlastTheVerifyCallAreLeftOut) {
  LatencyModel hypothesis_only_model;
  hypothesis_only_model.set_target({0.0, 0.0, 0.005});
  hypothesis_only_model.set_drafter("draft", DrafterCost{false, ForwardCoefficients{0.0, 0.0004, 0.0}, 0});
  hypothesis_only_model.set_rpc_seconds(0.0001);
  hypothesis_only_model.set_pipeline(true);
  LatencyModel covering_model = hypothesis_only_model;
  covering_model.set_draft_ahead_alternatives(4);
  const std::vector<GoodputItem> items = {{100, 0.95, "draft", true}};
  const GoodputModel hypothesis_only(hypothesis_only_model, items, 8);
  const GoodputModel covering(covering_model, items, 8);
  const auto alone = hypothesis_only.Exposure(0, 3);
  ASSERT_LT(alone.draft, 1.0);  // drafting ahead pays with the hypothesis alone
  EXPECT_DOUBLE_EQ(covering.Exposure(0, 3).draft, alone.draft);
  EXPECT_DOUBLE_EQ(covering.Exposure(0, 3).rpc, alone.rpc);
  EXPECT_DOUBLE_EQ(covering.StepSeconds({3}), hypothesis_only.StepSeconds({3}));
}

// The step waits for what of the draft made ahead (one level deeper, its first forward feeding
// the chain and the guess) outlasts the verify call, and for a serial Propose (also one level
// deeper) when the draft made ahead missed.
TEST(GoodputTest, PipelineChargesWhatOutlastsTheVerifyAndWhatMisses) {
  const LatencyModel m = SelfDraftModel(true);
  const double a = 0.9;
  const int32_t k = 3;
  GoodputModel g(m, {{300, a, "draft", true}}, 8);
  const LatencyModel::ResolvedDrafter d = m.Resolve("draft");
  const double verify = m.TargetSeconds(300, k + 1);
  const double serial = m.DraftSeconds(d, std::vector<int32_t>{300}, std::vector<int32_t>{k + 1});
  const double ahead = m.DraftSeconds(d, std::vector<int32_t>{300 + k + 1}, std::vector<int32_t>{k + 1}, k + 1);
  const double hit = std::pow(a, k + 1);
  ASSERT_GT(ahead, verify);  // the case this test is about
  const double expected = verify + m.RpcSeconds() + (1 - hit) * (serial + m.RpcSeconds()) + (ahead - verify);
  EXPECT_NEAR(g.StepSeconds({k}), expected, 1e-12);
  // Lower acceptance, more misses: dearer.
  GoodputModel worse(m, {{300, 0.6, "draft", true}}, 8);
  EXPECT_GT(worse.StepSeconds({k}), g.StepSeconds({k}));
}

// Where drafts made ahead slow the verify call beside them (LatencyModel::verify_slowdown),
// a draft ahead that fits the verify call is no longer free: what it adds to the call is
// exposed, and where that outweighs the Propose a hit saves the step is priced serial.
TEST(GoodputTest, PipelinePricesWhatDraftingAheadAddsToTheVerifyCall) {
  const std::vector<GoodputItem> items = {{100, 1.0, "draft", true}};
  auto with_slowdown = [](double slowdown) {
    LatencyModel m = TwoPoolModel();  // drafting ~2 ms a level against a 10 ms verify
    m.set_pipeline(true);
    // Runs of verify calls beside drafts, each followed by one alone, as the router's probes
    // make them.
    for (int run = 0; run < 8; ++run) {
      for (int i = 0; i < 8; ++i) m.ObserveVerify(true, 100, 3, slowdown * m.FileTargetSeconds(100, 3));
      m.ObserveVerify(false, 100, 3, m.FileTargetSeconds(100, 3));
    }
    return m;
  };
  const LatencyModel slight = with_slowdown(1.1);  // under VerifySlowdown::kPricedFrom
  EXPECT_EQ(slight.verify_slowdown(), 0.0);
  EXPECT_DOUBLE_EQ(GoodputModel(slight, items, 4).Exposure(0, 2).draft, 0.0);
  const LatencyModel half = with_slowdown(1.5);
  EXPECT_NEAR(half.verify_slowdown(), 0.5, 1e-9);
  const GoodputModel g(half, items, 4);
  const LatencyModel::ResolvedDrafter d = half.Resolve("draft");
  const double chain = half.DraftSeconds(d, std::vector<int32_t>{100}, std::vector<int32_t>{2});
  const double verify = half.TargetSeconds(100, 3);
  // Half the verify call (~5 ms) is more than the 2-level chain's Propose (~4 ms): serial.
  ASSERT_GT(0.5 * verify, chain + half.RpcSeconds());
  EXPECT_DOUBLE_EQ(g.Exposure(0, 2).draft, 1.0);
  EXPECT_DOUBLE_EQ(g.Exposure(0, 2).rpc, 1.0);
  // A deeper chain saves more than the slowdown costs: drafted ahead, the slowdown exposed.
  const double chain4 = half.DraftSeconds(d, std::vector<int32_t>{100}, std::vector<int32_t>{3});
  const double verify4 = half.TargetSeconds(100, 4);
  ASSERT_LT(0.5 * verify4, chain4 + half.RpcSeconds());
  EXPECT_NEAR(g.Exposure(0, 3).draft, 0.5 * verify4 / chain4, 1e-9);
  EXPECT_DOUBLE_EQ(g.Exposure(0, 3).rpc, 0.0);
}

// Where a miss, the extra level and the overrun cost more than the Propose a draft made ahead
// saves, the router drafts the chain without a guess and nothing ahead
// (RouterCore::DraftGuessPays), so goodput prices the step exactly as without the pipeline.
TEST(GoodputTest, PipelineWithoutAPayingDraftAheadIsPricedSerial) {
  const LatencyModel m = SelfDraftModel(true);
  const std::vector<GoodputItem> items = {{300, 0.2, "draft", true}};
  GoodputModel g(m, items, 8);
  const LatencyModel::ResolvedDrafter d = m.Resolve("draft");
  const double chain = m.DraftSeconds(d, std::vector<int32_t>{300}, std::vector<int32_t>{2});
  EXPECT_NEAR(g.StepSeconds({2}), m.TargetSeconds(300, 3) + chain + 2 * m.RpcSeconds(), 1e-12);
  EXPECT_DOUBLE_EQ(g.Exposure(0, 2).draft, 1.0);
  EXPECT_DOUBLE_EQ(g.Exposure(0, 2).rpc, 1.0);
  const LatencyModel serial_model = SelfDraftModel(false);  // GoodputModel keeps a reference
  const GoodputModel serial(serial_model, items, 8);
  for (int32_t k = 0; k <= 8; ++k) EXPECT_NEAR(g.StepSeconds({k}), serial.StepSeconds({k}), 1e-12) << k;
}

// A cheap drafter whose drafts made ahead would always hide, but whose chains rarely land
// whole: the guess's extra level costs every step, a hit saves a Propose only now and then.
TEST(GoodputTest, PipelineLeavesOutAGuessThatCostsMoreThanItsHitsSave) {
  LatencyModel m;
  m.set_target({2e-6, 7e-4, 0.0025});
  m.set_drafter("draft", DrafterCost{false, {1e-7, 5e-5, 1e-4}, 0});
  m.set_rpc_seconds(1e-4);
  m.set_pipeline(true);
  const LatencyModel::ResolvedDrafter d = m.Resolve("draft");
  for (double a : {0.3, 0.97}) {
    GoodputModel g(m, {{300, a, "draft", true}}, 8);
    const double hit = std::pow(a, 4);
    const double chain = m.DraftSeconds(d, std::vector<int32_t>{300}, std::vector<int32_t>{3});
    const double deeper = m.DraftSeconds(d, std::vector<int32_t>{300}, std::vector<int32_t>{4});
    const bool pays = (1 - hit) * (deeper + m.RpcSeconds()) < chain + m.RpcSeconds();
    EXPECT_EQ(pays, a > 0.5) << a;  // the two cases this test is about
    EXPECT_DOUBLE_EQ(g.Exposure(0, 3).rpc, pays ? 1 - hit : 1.0) << a;
  }
}

// A drafter whose guesses nearly always land but whose forwards cost a third of the target's:
// serially the longest chains pay best (the verify's fixed cost is shared by more tokens); with
// the pipeline a chain whose draft made ahead fits the verify does, and it beats the serial
// optimum.
TEST(GoodputTest, PipelinePrefersChainsWhoseDraftAheadFitsTheVerify) {
  const std::vector<GoodputItem> items = {{300, 0.99, "draft", true}};
  const LatencyModel serial_model = SelfDraftModel(false), pipelined_model = SelfDraftModel(true);
  const GoodputModel serial(serial_model, items, 8), pipelined(pipelined_model, items, 8);
  const int32_t k_serial = serial.BestPerRequest()[0], k_pipelined = pipelined.BestPerRequest()[0];
  EXPECT_GE(k_serial, 6);
  EXPECT_GE(k_pipelined, 1);
  EXPECT_LT(k_pipelined, k_serial);
  EXPECT_GT(pipelined.Goodput({k_pipelined}), 1.1 * serial.Goodput({k_serial}));
  EXPECT_EQ(pipelined.BestUniform()[0], k_pipelined);
  EXPECT_EQ(pipelined.BestPrefix(1, true).k[0], k_pipelined);
  EXPECT_EQ(pipelined.BestPrefix(1, false).k[0], k_pipelined);
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

// With the pipeline the optimiser's candidates (one per depth vector) still hold the best
// goodput over every k vector, for the models and batches of these trials.
TEST(GoodputTest, PipelinedPerRequestOptimumMatchesBruteForce) {
  std::mt19937_64 rng(321);
  std::uniform_real_distribution<double> acc(0.05, 0.995);
  std::uniform_int_distribution<int> ctx(1, 3000), n_dist(1, 4), v_dist(1, 5), pool(0, 2);
  for (int trial = 0; trial < 300; ++trial) {
    LatencyModel m = trial % 2 == 0 ? TwoPoolModel() : SelfDraftModel(true);
    if (trial % 2 == 0) m.set_drafter("ngram", DrafterCost{true, {}, 0.0015});
    m.set_pipeline(true);
    std::vector<GoodputItem> items;
    const int n = n_dist(rng);
    for (int i = 0; i < n; ++i) {
      const int p = pool(rng);
      items.push_back({ctx(rng), acc(rng), p == 1 ? "ngram" : "draft", p != 2 || i == 0});
    }
    const int v = v_dist(rng);
    GoodputModel g(m, items, v);
    const double brute = BruteForceBest(g, items, v);
    EXPECT_NEAR(g.Goodput(g.BestPerRequest()), brute, 1e-9 * brute) << "trial " << trial;
  }
}

// A target whose forward is flat while weight reads bound it (the profiled batch shape): every
// search prices its candidates with it, including the batch-granularity prefix search, whose
// own accumulation is otherwise linear, and the per-request solver, whose costs are.
TEST(GoodputTest, TheTargetsBatchShapePricesEveryCandidate) {
  LatencyModel line = SelfDraftModel(false);
  line.set_drafter("draft", DrafterCost{false, {0, 1e-4, 2e-4}, 0});  // a cheap drafter
  LatencyModel shaped = line;
  // T(n) at context 300 stays at T(1) up to 6 tokens, then follows the line.
  std::map<int32_t, double> factors;
  for (int32_t n = 1; n <= 6; ++n) factors[n] = line.TargetSeconds(300, 1) / line.TargetSeconds(300, n);
  factors[7] = 1.0;
  shaped.set_target_batch_factors(factors);
  const std::vector<GoodputItem> items = {{300, 0.7, "draft", true}};
  auto best_by_enumeration = [&](const GoodputModel& g) {
    int32_t best = 0;
    for (int32_t k = 1; k <= 8; ++k) {
      if (g.Goodput({k}) > g.Goodput({best})) best = k;
    }
    return best;
  };
  const GoodputModel by_line(line, items, 8), by_shape(shaped, items, 8);
  const int32_t k_line = best_by_enumeration(by_line), k_shape = best_by_enumeration(by_shape);
  EXPECT_GT(k_shape, k_line);  // verifying more tokens costs nothing up to 6: draft more
  EXPECT_EQ(by_shape.BestUniform()[0], k_shape);
  EXPECT_EQ(by_shape.BestPerRequest()[0], k_shape);
  EXPECT_EQ(by_shape.BestPrefix(1, false).k[0], k_shape);
  EXPECT_EQ(by_shape.BestPrefix(1, true).k[0], k_shape);
}

// A drafter whose forward has a floor at one request (its shape 3x the line there, 1x from
// four): the one-pass prefix search prices each prefix's drafting at its drafting count, as
// the exact step time does, so it finds the best (prefix, uniform k) of an enumeration.
TEST(GoodputTest, TheDraftersBatchShapePricesEveryPrefix) {
  LatencyModel m = TwoPoolModel();
  m.set_drafter_batch_factors("draft", {{1, 3.0}, {2, 2.0}, {4, 1.0}});
  const std::vector<GoodputItem> items = {
      {300, 0.8, "draft", true}, {500, 0.7, "draft", true}, {200, 0.75, "draft", true}, {400, 0.6, "draft", true}};
  const GoodputModel g(m, items, 5);
  double best = -1;
  for (size_t size = 1; size <= items.size(); ++size) {
    for (int32_t x = 0; x <= 5; ++x) {
      std::vector<int32_t> k(items.size(), 0);
      for (size_t i = 0; i < size; ++i) k[i] = x;
      best = std::max(best, g.PrefixGoodput(size, k));
    }
  }
  const GoodputModel::Prefix prefix = g.BestPrefix(1, /*per_request=*/false);
  EXPECT_NEAR(prefix.goodput, best, 1e-12 * best);
  // The shape is in the exact step time: one request drafting pays 3x its line.
  const LatencyModel line = TwoPoolModel();
  const GoodputModel unshaped(line, items, 5);
  const std::vector<int32_t> one = {2, 0, 0, 0};
  const double line_draft = line.DraftSeconds("draft", std::vector<int32_t>{300}, std::vector<int32_t>{2});
  EXPECT_NEAR(g.StepSeconds(one) - unshaped.StepSeconds(one), 2 * line_draft, 1e-12);
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
