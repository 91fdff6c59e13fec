// Decisions of each policy: tiers' gates, FSM rules, analytical window, factory errors.
#include "router/policies/policies.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::router {
namespace {

PolicyInput Batch(int n, int max_k = 8) {
  PolicyInput in;
  in.max_k = max_k;
  for (int i = 0; i < n; ++i) {
    PolicyRequest r;
    r.id = i + 1;
    r.context_tokens = 100;
    r.speculative = true;
    r.max_useful_k = max_k;
    in.requests.push_back(r);
  }
  return in;
}

// n requests of one drafter pool at one acceptance estimate.
PolicyInput PoolBatch(int n, const std::string& pool, double acceptance, int32_t remaining_tokens = 0) {
  PolicyInput in = Batch(n);
  for (PolicyRequest& r : in.requests) {
    r.pool = pool;
    r.acceptance = acceptance;
    r.remaining_tokens = remaining_tokens;
  }
  return in;
}

StepOutcome Accepted(int32_t proposed, std::vector<int32_t> accepted) {
  StepOutcome o;
  spec::RequestId id = 1;
  for (int32_t a : accepted) {
    RequestOutcome r;
    r.id = id++;
    r.proposed = proposed;
    r.accepted = a;
    o.requests.push_back(r);
  }
  return o;
}

SglangTiersPolicy Tiers(double alpha = 1.0, double down = -0.25, double up = 0.0) {
  SglangTiersPolicy::Config c;
  c.ema_alpha = alpha;  // 1.0: the EMA is the last batch, so tests set it exactly
  c.down_hysteresis = down;
  c.up_hysteresis = up;
  return SglangTiersPolicy(c);
}

TEST(SglangTiersTest, DefaultsSnapAndDecide) {
  SglangTiersPolicy t = Tiers(0.2);
  EXPECT_EQ(t.active_tier(), 3);
  EXPECT_DOUBLE_EQ(t.ema_accept_len(), 2.0);
  const std::vector<int32_t> k = t.Decide(Batch(3));
  EXPECT_EQ(k, (std::vector<int32_t>{3, 3, 3}));
  SglangTiersPolicy::Config c;
  c.initial_steps = 6;  // nearest tier is 7
  EXPECT_EQ(SglangTiersPolicy(c).active_tier(), 7);
}

TEST(SglangTiersTest, NoSwitchDuringWarmup) {
  SglangTiersPolicy t = Tiers();
  for (int i = 0; i < 10; ++i) {
    t.Observe(Accepted(3, {3, 3}));  // would push the tier up
    EXPECT_EQ(t.active_tier(), 3) << "batch " << i + 1;
  }
  // Batches 11..14 are not on the interval either; batch 15 is.
  for (int i = 0; i < 4; ++i) {
    t.Observe(Accepted(3, {3, 3}));
    EXPECT_EQ(t.active_tier(), 3);
  }
  t.Observe(Accepted(3, {3, 3}));
  EXPECT_EQ(t.active_tier(), 7);
  // The switch applies to the next round.
  EXPECT_EQ(t.Decide(Batch(2)), (std::vector<int32_t>{7, 7}));
}

TEST(SglangTiersTest, DecisionsOnlyEveryInterval) {
  SglangTiersPolicy t = Tiers();
  for (int i = 0; i < 15; ++i) t.Observe(Accepted(3, {3}));
  ASSERT_EQ(t.active_tier(), 7);
  // Acceptance collapses right after a decision: nothing moves until batch 20.
  for (int i = 16; i < 20; ++i) {
    t.Observe(Accepted(7, {0}));
    EXPECT_EQ(t.active_tier(), 7) << "batch " << i;
  }
  t.Observe(Accepted(7, {0}));
  EXPECT_EQ(t.active_tier(), 1);  // ema 0 <= 0.25 and <= 2.25: down two tiers at once
}

TEST(SglangTiersTest, DownHysteresisHoldsTheTier) {
  // From tier 3 the way down to 1 needs ema <= (1 - 0.5) + down_hysteresis.
  for (const auto& [down, ema, expect] :
       std::vector<std::tuple<double, int, int>>{{-0.25, 0, 1}, {-0.6, 0, 3}}) {
    SglangTiersPolicy t = Tiers(1.0, down);
    for (int i = 0; i < 15; ++i) t.Observe(Accepted(3, {ema}));
    EXPECT_EQ(t.active_tier(), expect) << "down_hysteresis " << down;
  }
  // Half-accepted batches (ema 0.5 over two requests 0 and 1): without hysteresis that is
  // <= 0.5 and drops; the default -0.25 keeps tier 3.
  SglangTiersPolicy keep = Tiers(1.0, -0.25);
  SglangTiersPolicy drop = Tiers(1.0, 0.0);
  for (int i = 0; i < 15; ++i) {
    keep.Observe(Accepted(3, {0, 1}));
    drop.Observe(Accepted(3, {0, 1}));
  }
  EXPECT_EQ(keep.active_tier(), 3);
  EXPECT_EQ(drop.active_tier(), 1);
}

TEST(SglangTiersTest, UpHysteresisDelaysGoingUp) {
  // From tier 3 up to 7 needs ema > (3 - 0.5) + up_hysteresis; ema 2.75 here.
  SglangTiersPolicy eager = Tiers(1.0, -0.25, 0.0);
  SglangTiersPolicy reluctant = Tiers(1.0, -0.25, 0.5);
  for (int i = 0; i < 15; ++i) {
    eager.Observe(Accepted(3, {3, 3, 3, 2}));
    reluctant.Observe(Accepted(3, {3, 3, 3, 2}));
  }
  EXPECT_EQ(eager.active_tier(), 7);
  EXPECT_EQ(reluctant.active_tier(), 3);
}

TEST(SglangTiersTest, ZeroTierProbesUpward) {
  SglangTiersPolicy::Config c;
  c.candidate_steps = {0, 2, 4};
  c.ema_alpha = 1.0;
  c.initial_steps = 0;
  SglangTiersPolicy t(c);
  EXPECT_EQ(t.Decide(Batch(1)), std::vector<int32_t>{0});
  for (int i = 0; i < 15; ++i) t.Observe(Accepted(0, {0}));
  EXPECT_EQ(t.active_tier(), 2);
}

TEST(FsmTest, DownOnRejectionUpOnFullAccept) {
  FsmPolicy::Config c;
  c.gamma_init = 3;
  c.gamma_max = 4;
  FsmPolicy f(c);
  EXPECT_EQ(f.Decide(Batch(1)), std::vector<int32_t>{3});
  f.Observe(Accepted(3, {3}));
  EXPECT_EQ(f.GammaOf(1), 4);
  f.Observe(Accepted(4, {4}));
  EXPECT_EQ(f.GammaOf(1), 4);  // capped at gamma_max
  f.Observe(Accepted(4, {2}));
  EXPECT_EQ(f.GammaOf(1), 3);
  for (int i = 0; i < 5; ++i) f.Observe(Accepted(1, {0}));
  EXPECT_EQ(f.GammaOf(1), 0);
}

TEST(FsmTest, ProbesAfterStayingAtZero) {
  FsmPolicy::Config c;
  c.gamma_init = 0;
  c.probe_after = 3;
  FsmPolicy f(c);
  EXPECT_EQ(f.Decide(Batch(1)), std::vector<int32_t>{0});
  EXPECT_EQ(f.Decide(Batch(1)), std::vector<int32_t>{0});
  EXPECT_EQ(f.Decide(Batch(1)), std::vector<int32_t>{1});
  f.Observe(Accepted(1, {1}));
  EXPECT_EQ(f.GammaOf(1), 1);
}

TEST(CacheFsmTest, RewardsTokensSeenBefore) {
  FsmPolicy::Config c;
  c.use_cache = true;
  c.gamma_init = 3;
  FsmPolicy f(c);
  PolicyInput in = Batch(1);
  const std::vector<int32_t> history = {10, 11, 12};
  in.requests[0].history = history;
  f.Decide(in);
  auto outcome = [](int32_t proposed, int32_t accepted, std::vector<int32_t> emitted) {
    StepOutcome o;
    RequestOutcome r;
    r.id = 1;
    r.proposed = proposed;
    r.accepted = accepted;
    r.emitted = std::move(emitted);
    o.requests.push_back(r);
    return o;
  };
  f.Observe(outcome(3, 1, {11, 99}));  // accepted token 11 is cached: +1
  EXPECT_EQ(f.GammaOf(1), 4);
  f.Observe(outcome(4, 4, {12, 10, 50, 51, 52}));  // cached and all accepted: +2
  EXPECT_EQ(f.GammaOf(1), 6);
  f.Observe(outcome(6, 1, {77, 78}));  // accepted 77 never seen: -1
  EXPECT_EQ(f.GammaOf(1), 5);
  f.Observe(outcome(5, 1, {99, 5}));  // 99 was cached by the first step's bonus token: +1
  EXPECT_EQ(f.GammaOf(1), 6);
}

TEST(AnalyticalTest, WindowGrowsWithAccuracyAndShrinksToZero) {
  AnalyticalPolicy::Config c;
  c.history = 8;
  c.prior_weight = 0;
  LatencyModel model;
  AcceptanceTracker tracker;
  int32_t last = -1;
  for (int accepted : {0, 1, 2, 3, 4}) {
    AnalyticalPolicy p(c);
    for (int i = 0; i < 8; ++i) p.Observe(Accepted(4, {accepted}));
    PolicyInput in = Batch(1);
    in.latency = &model;
    in.acceptance = &tracker;
    const int32_t k = p.Decide(in)[0];
    EXPECT_GE(k, last) << "accepted " << accepted;
    last = k;
    if (accepted == 0) {
      EXPECT_EQ(k, 0);
    }
  }
  EXPECT_GE(last, 4);  // b capped at 0.98 with a cheap drafter: long windows
}

TEST(PolicyFactoryTest, NamesAndErrors) {
  for (const char* name :
       {"none", "static:0", "static:4", "smartspec", "sglang-tiers", "analytical", "fsm",
        "cache-fsm"}) {
    auto p = MakePolicy(name, nlohmann::json::object());
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ((*p)->Name(), name);
  }
  EXPECT_FALSE(MakePolicy("static:x", {}).ok());
  EXPECT_FALSE(MakePolicy("static:-1", {}).ok());
  EXPECT_FALSE(MakePolicy("magic", {}).ok());
  EXPECT_FALSE(MakePolicy("smartspec", {{"granularity", "token"}}).ok());
  EXPECT_FALSE(MakePolicy("sglang-tiers", {{"candidate_steps", "1,3"}}).ok());
  EXPECT_FALSE(MakePolicy("sglang-tiers", {{"ema_alpha", 0}}).ok());
  EXPECT_FALSE(MakePolicy("fsm", nlohmann::json::array()).ok());
  auto tiers = MakePolicy("sglang-tiers", {{"candidate_steps", {2, 5}}, {"initial_steps", 5}});
  ASSERT_TRUE(tiers.ok());
  EXPECT_EQ((*tiers)->Describe()["speculative_num_steps"], 5);
}

TEST(StaticTreePolicyTest, ParsesAndAsksEverySpeculativeRequestForTheTree) {
  auto p = MakePolicy("static-tree:3:8", {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->Name(), "static-tree:3:8");
  PolicyInput in = Batch(3);
  in.requests[1].speculative = false;
  const std::vector<ProposalChoice> c = (*p)->DecideProposals(in);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_TRUE(c[0].tree());
  EXPECT_EQ(c[0].depth, 3);
  EXPECT_EQ(c[0].nodes, 8);
  EXPECT_EQ(c[1].depth, 0);
  for (const char* bad : {"static-tree:3", "static-tree:0:8", "static-tree:3:x", "static-tree:3:8:1",
                          "static-tree:3:1000"}) {
    EXPECT_FALSE(MakePolicy(bad, {}).ok()) << bad;
  }
  EXPECT_FALSE(MakePolicy("smartspec", {{"max_tree_nodes", 1}}).ok());
}

// With a cheap verifier (verified tokens almost free) and per-depth estimates showing a
// tree catches far more than a chain, smartspec switches requests to trees; with trees off it
// keeps chains.
TEST(SmartSpecTreesTest, ChoosesTreesWhenTheyPayAndChainsWhenOff) {
  LatencyModel latency;
  latency.set_target(ForwardCoefficients{0.0, 1e-6, 0.01});
  TreeAcceptance trees;
  for (int i = 0; i < 200; ++i) {
    for (int nodes : {8, 12, 16}) trees.Observe("p", 4, nodes, 4, true);
  }
  PolicyInput in = PoolBatch(2, "p", 0.3);
  in.latency = &latency;
  in.tree_acceptance = &trees;
  auto on = MakePolicy("smartspec", {});
  auto off = MakePolicy("smartspec", {{"trees", false}});
  ASSERT_TRUE(on.ok() && off.ok());
  for (const ProposalChoice& c : (*on)->DecideProposals(in)) EXPECT_TRUE(c.tree()) << c.depth << ":" << c.nodes;
  for (const ProposalChoice& c : (*off)->DecideProposals(in)) EXPECT_FALSE(c.tree());
}

// The same requests on a verifier whose forwards cost their line up to 5 tokens and 3x the
// line from 8: once the router has seen both sizes it stops sending trees that big (the line
// alone, fitted to small steps, keeps choosing them).
TEST(SmartSpecTreesTest, ALearntBatchResidualPricesBigTreesOut) {
  const ForwardCoefficients line{0.0, 1e-6, 0.01};
  TreeAcceptance trees;
  for (int i = 0; i < 200; ++i) {
    for (int nodes : {8, 12, 16}) trees.Observe("p", 4, nodes, 4, true);
  }
  auto decide = [&](const LatencyModel& latency) {
    PolicyInput in = PoolBatch(2, "p", 0.3);
    in.latency = &latency;
    in.tree_acceptance = &trees;
    auto policy = MakePolicy("smartspec", {});
    EXPECT_TRUE(policy.ok());
    int32_t fed = 0;
    for (const ProposalChoice& c : (*policy)->DecideProposals(in)) fed += 1 + c.nodes;
    return fed;
  };
  LatencyModel latency;
  latency.set_target(line);
  latency.SetRefitTarget(line);
  EXPECT_GE(decide(latency), 16);  // big trees while every size looks like the line
  for (int i = 0; i < 4; ++i) {
    for (int n = 1; n <= 40; ++n) latency.ObserveTarget(0, n, line.Predict(0, n) * (n >= 8 ? 3.0 : 1.0));
  }
  EXPECT_LT(decide(latency), 8);
}

// A drafter whose forwards cost a third of the target's: at the estimators' prior of 0.6 every
// chain prices out, at a near-perfect acceptance a chain of one pays. Until the pool has
// `explore_verifications` verified drafts smartspec drafts that chain anyway, so the pool gets
// measured; a drafter that could never pay is left alone.
LatencyModel CostlyDrafterModel(double drafter_delta) {
  LatencyModel latency;
  latency.set_target(ForwardCoefficients{0.0, 0.0007, 0.003});
  latency.set_drafter("p", DrafterCost{false, ForwardCoefficients{0.0, 0.0005, drafter_delta}, 0});
  return latency;
}

std::vector<int32_t> Depths(const std::vector<ProposalChoice>& choices) {
  std::vector<int32_t> depths;
  for (const ProposalChoice& c : choices) depths.push_back(c.depth);
  return depths;
}

TEST(SmartSpecExploreTest, AnUnmeasuredPoolGetsAChainOfOneUntilItHasBeenMeasured) {
  const LatencyModel latency = CostlyDrafterModel(0.0008);
  AcceptanceTracker tracker;
  PolicyInput in = PoolBatch(2, "p", 0.6, 100);
  in.latency = &latency;
  in.acceptance = &tracker;
  auto off = MakePolicy("smartspec", {{"explore_verifications", 0}});
  auto on = MakePolicy("smartspec", {});
  ASSERT_TRUE(off.ok() && on.ok());
  // The premise: at the prior, goodput alone decodes plainly.
  EXPECT_EQ(Depths((*off)->DecideProposals(in)), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(Depths((*on)->DecideProposals(in)), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ((*on)->Describe()["explored_request_steps"].get<int64_t>(), 2);
  // A request that may not draft is not explored with.
  in.requests[1].speculative = false;
  EXPECT_EQ(Depths((*on)->DecideProposals(in)), (std::vector<int32_t>{1, 0}));
  in.requests[1].speculative = true;
  // Eight verified drafts (all rejected here): the pool is measured, goodput decides alone.
  for (int i = 0; i < 4; ++i) {
    tracker.ObserveStep({{1, "p", {1, 0}}, {2, "p", {1, 0}}});
  }
  EXPECT_EQ(Depths((*on)->DecideProposals(in)), (std::vector<int32_t>{0, 0}));
}

TEST(SmartSpecExploreTest, ADrafterThatCouldNeverPayIsNotExplored) {
  const LatencyModel latency = CostlyDrafterModel(10.0);
  AcceptanceTracker tracker;
  PolicyInput in = Batch(1);
  in.requests[0].pool = "p";
  in.requests[0].acceptance = 0.6;
  in.latency = &latency;
  in.acceptance = &tracker;
  auto on = MakePolicy("smartspec", {});
  ASSERT_TRUE(on.ok());
  EXPECT_EQ(Depths((*on)->DecideProposals(in)), (std::vector<int32_t>{0}));
  EXPECT_FALSE(MakePolicy("smartspec", {{"explore_verifications", -1}}).ok());
}

// The router prices a step ahead (PriceProposals) and takes the decision later, or never
// (RecordProposals): pricing alone leaves the policy as it was, and pricing then recording is
// DecideProposals, bookkeeping included, whichever paths a decision takes (trees, a chain of
// one to measure a pool, requests left out of the batch, prefill disabling's window).
TEST(SmartSpecPriceAheadTest, PricingChangesNothingAndRecordingItIsDeciding) {
  TreeAcceptance trees;
  for (int i = 0; i < 200; ++i) {
    for (int nodes : {8, 12, 16}) trees.Observe("p", 4, nodes, 4, true);
  }
  LatencyModel tree_latency;
  tree_latency.set_target(ForwardCoefficients{0.0, 1e-6, 0.01});
  PolicyInput tree_step = PoolBatch(2, "p", 0.3);
  tree_step.latency = &tree_latency;
  tree_step.tree_acceptance = &trees;

  const LatencyModel costly_drafter = CostlyDrafterModel(0.0008);
  AcceptanceTracker tracker;
  PolicyInput explore_step = PoolBatch(2, "p", 0.6, 100);
  explore_step.latency = &costly_drafter;
  explore_step.acceptance = &tracker;

  // Three short contexts and a long one behind them, on a target whose context reads cost: the
  // long one is left out.
  LatencyModel context_latency;
  context_latency.set_target({1e-5, 1e-4, 1e-3});
  context_latency.set_drafter("default", DrafterCost{false, {0, 1e-5, 1e-4}, 0});
  context_latency.set_rpc_seconds(0);
  PolicyInput tail_step = PoolBatch(4, "default", 0.8, 100);
  tail_step.max_k = 4;
  for (PolicyRequest& r : tail_step.requests) {
    r.max_useful_k = 4;
    r.must_run = false;
  }
  tail_step.requests[0].must_run = true;
  tail_step.requests[3].context_tokens = 4000;
  tail_step.latency = &context_latency;

  PolicyInput plain_step = tail_step;
  for (PolicyRequest& r : plain_step.requests) r.speculative = false;

  auto deciding = MakePolicy("smartspec", {});
  auto pricing = MakePolicy("smartspec", {});
  ASSERT_TRUE(deciding.ok() && pricing.ok());
  EXPECT_TRUE((*pricing)->PricesAhead());
  for (int round = 0; round < 3; ++round) {
    for (const PolicyInput* step : {&tree_step, &explore_step, &tail_step, &plain_step}) {
      const std::vector<ProposalChoice> decided = (*deciding)->DecideProposals(*step);
      const nlohmann::json before = (*pricing)->Describe();
      std::unique_ptr<PricedProposals> priced = (*pricing)->PriceProposals(*step);
      ASSERT_NE(priced, nullptr);
      EXPECT_EQ((*pricing)->Describe(), before);
      // A decision priced and dropped (the step did not come as assumed) leaves no trace.
      ASSERT_NE((*pricing)->PriceProposals(*step), nullptr);
      const std::vector<ProposalChoice> recorded = (*pricing)->RecordProposals(std::move(priced));
      ASSERT_EQ(recorded.size(), decided.size());
      for (size_t i = 0; i < decided.size(); ++i) {
        EXPECT_EQ(recorded[i].depth, decided[i].depth) << i;
        EXPECT_EQ(recorded[i].nodes, decided[i].nodes) << i;
        EXPECT_EQ(recorded[i].expected_tokens, decided[i].expected_tokens) << i;
      }
      EXPECT_EQ((*pricing)->Describe(), (*deciding)->Describe());
    }
  }
  // Every kind of bookkeeping was exercised.
  const nlohmann::json state = (*pricing)->Describe();
  EXPECT_GT(state["tree_request_steps"].get<int64_t>(), 0);
  EXPECT_GT(state["explored_request_steps"].get<int64_t>(), 0);
  EXPECT_GT(state["sat_out_request_steps"].get<int64_t>(), 0);
  EXPECT_GT(state["short_prefix_steps"].get<int64_t>(), 0);
  EXPECT_GT(state["recent_zero_fraction"].get<double>(), 0);
  EXPECT_FALSE(state["k_histogram"].empty());
}

// Policies that price only when deciding say so.
TEST(PriceAheadTest, OtherPoliciesDoNotPriceAhead) {
  for (const char* name : {"none", "static:3", "sglang-tiers", "analytical", "fsm"}) {
    auto policy = MakePolicy(name, {});
    ASSERT_TRUE(policy.ok()) << name;
    EXPECT_FALSE((*policy)->PricesAhead()) << name;
    EXPECT_EQ((*policy)->PriceProposals(Batch(2)), nullptr) << name;
  }
}

TEST(StaticPolicyTest, NonSpeculativeRequestsGetZero) {
  StaticPolicy p(4);
  PolicyInput in = Batch(3);
  in.requests[1].speculative = false;
  EXPECT_EQ(p.Decide(in), (std::vector<int32_t>{4, 0, 4}));
}

}  // namespace
}  // namespace splitspec::router
