// Draft-ahead (RouterOptions::pipeline) with in-process fakes: while a step verifies, the next
// step's chain is drafted on the hypothesis that the whole chain and the drafter's guess are
// accepted. Outputs stay the target's token for token; a draft made ahead is used when the
// hypothesis held and dropped otherwise, and the drafter's session stays in step (a known
// length past what the drafter holds, or a refused item, would show as a protocol error or a
// resend).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <set>

#include "tests/unit/router/router_harness.h"

namespace splitspec::router::testing {
namespace {

struct PipelineRun {
  ServerInfo info;
  int drafter_calls = 0;
  int beside_verify_calls = 0;  // of them, drafts made ahead (ProposeBesideVerify)
  int64_t steps = 0;
  int64_t alternatives_asked = 0;
};

// A 10 ms verify call and 0.5 ms draft forwards: a draft made ahead always fits in the verify
// call.
LatencyModel DraftsFitTheVerifyModel() {
  LatencyModel model;
  model.set_target({0.0, 0.0, 0.01});
  model.set_drafter("pool0", DrafterCost{false, ForwardCoefficients{0.0, 0.0, 0.0005}, 0});
  model.set_rpc_seconds(0.0001);
  return model;
}

// `accuracy`: the fake drafter's chance to propose (and guess) the target's token.
// `work_inside_verify`: the verifier client runs the draft-ahead inside its call on the loop
// thread (as over a step socket) instead of the router's side thread running it beside the call.
// `alternatives` >= 0: RouterOptions::draft_ahead_alternatives, under a latency model where a
// draft made ahead always fits in the verify call (-1: none, under the harness's model).
PipelineRun RunPipelined(double accuracy, int n_requests, int32_t max_tokens, bool pipeline = true,
                         bool work_inside_verify = false, int32_t alternatives = -1) {
  RouterOptions options;
  options.pipeline = pipeline;
  options.draft_ahead_alternatives = std::max(alternatives, 0);
  Harness h("static:3", options);
  h.verifier.overlaps_work = work_inside_verify;
  h.drafters[0] = std::make_unique<FakeDrafter>(accuracy, 11);
  // No cross-check of the drafter against the fake verifier's state: with the pipeline the
  // drafter is called while the verifier runs, and holds hypothetical tokens by design.
  if (alternatives >= 0) {
    h.core = std::make_unique<RouterCore>(options, &h.verifier, DrafterPools{{"pool0", h.drafters[0].get()}},
                                          std::move(*MakePolicy("static:3", nlohmann::json::object())),
                                          DraftsFitTheVerifyModel(), &h.clock);
  } else {
    h.Build("static:3", options, nlohmann::json::object());
  }
  EXPECT_TRUE(h.core->Init().ok());
  std::vector<RequestId> ids;
  for (int i = 0; i < n_requests; ++i) {
    auto id = h.Submit(Prompt(40 + i, 7 + i), max_tokens + i);
    EXPECT_TRUE(id.ok());
    ids.push_back(*id);
  }
  h.RunUntilIdle();
  for (int i = 0; i < n_requests; ++i) {
    const Collected& c = h.out[ids[i]];
    EXPECT_EQ(c.tokens, ReferenceGeneration(Prompt(40 + i, 7 + i), max_tokens + i)) << "request " << i;
    EXPECT_EQ(c.final_event.finish_reason, FinishReason::kLength);
    EXPECT_TRUE(h.drafters[0]->released.count(ids[i]));
  }
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty()) << h.drafters[0]->protocol_errors[0];
  EXPECT_TRUE(h.verifier.protocol_errors.empty()) << h.verifier.protocol_errors[0];
  if (work_inside_verify && pipeline) {
    EXPECT_GT(h.verifier.work_in_calls, 0);
  }
  // Drafts made ahead go through ProposeBesideVerify (whose client need not poll for them),
  // every other Propose as before.
  if (pipeline) {
    EXPECT_LT(h.drafters[0]->beside_verify_calls, h.drafters[0]->calls);
  } else {
    EXPECT_EQ(h.drafters[0]->beside_verify_calls, 0);
  }
  PipelineRun run;
  run.info = h.core->Snapshot();
  run.drafter_calls = h.drafters[0]->calls;
  run.beside_verify_calls = h.drafters[0]->beside_verify_calls;
  run.alternatives_asked = h.drafters[0]->alternatives_asked;
  run.steps = run.info.steps;
  return run;
}

// The harness's core rebuilt over its fakes with this latency model and policy.
bool BuildWithModel(Harness& h, const std::string& policy, const RouterOptions& options, const LatencyModel& model) {
  h.core = std::make_unique<RouterCore>(options, &h.verifier, DrafterPools{{"pool0", h.drafters[0].get()}},
                                        std::move(*MakePolicy(policy, nlohmann::json::object())), model, &h.clock);
  return h.core->Init().ok();
}

TEST(PipelineTest, MixedOutcomesUseSomeDraftsAndDropOthers) {
  const PipelineRun run = RunPipelined(0.8, 6, 40);
  EXPECT_GT(run.info.draft_ahead_used, 0);
  EXPECT_GT(run.info.draft_ahead_dropped, 0);
}

// Inside the call (as over a step socket) the drafts made ahead are also planned there, after
// the verify request is out; beside it they are planned before the call. The same plans either
// way.
TEST(PipelineTest, DraftingAheadInsideTheVerifyCallGivesTheSameOutcomes) {
  const PipelineRun beside = RunPipelined(0.8, 6, 40);
  const PipelineRun inside = RunPipelined(0.8, 6, 40, /*pipeline=*/true, /*work_inside_verify=*/true);
  EXPECT_EQ(inside.info.draft_ahead_used, beside.info.draft_ahead_used);
  EXPECT_EQ(inside.info.draft_ahead_dropped, beside.info.draft_ahead_dropped);
  EXPECT_EQ(inside.steps, beside.steps);
  EXPECT_EQ(inside.beside_verify_calls, beside.beside_verify_calls);
  EXPECT_EQ(inside.drafter_calls, beside.drafter_calls);
}

TEST(PipelineTest, AHypothesisThatAlwaysHoldsLeavesOnlyDraftAheadCalls) {
  // A perfect drafter: every step emits chain + guess, so after a request's first step every
  // draft was made ahead: one Propose per step (the draft-ahead), none waited for.
  const PipelineRun run = RunPipelined(1.0, 1, 60);
  EXPECT_EQ(run.info.draft_ahead_dropped, 0);
  EXPECT_GE(run.info.draft_ahead_used, run.steps - 2);
  EXPECT_LE(run.drafter_calls, static_cast<int>(run.steps) + 1);
  EXPECT_GE(run.beside_verify_calls, static_cast<int>(run.steps) - 2);
}

// A drafter that never lands: no draft made ahead is ever used, and once the acceptance
// estimate has fallen no chain gets a guess, so nothing more is drafted ahead.
TEST(PipelineTest, AHypothesisThatNeverHoldsIsNeverUsed) {
  const PipelineRun run = RunPipelined(0.0, 3, 30);
  EXPECT_EQ(run.info.draft_ahead_used, 0);
  EXPECT_LT(run.info.draft_ahead_dropped, run.steps / 4);
}

// The draft-time correction compares a drafter's compute with the levels it really drafted:
// with the pipeline a chain of k is drafted k + 1 deep, and the drafts made ahead count too. A
// drafter exactly as fast as the latency model says keeps a correction of 1 (comparing with k
// levels made it (k + 1) / k, and the policy then priced every draft that much dearer).
TEST(PipelineTest, TheDraftTimeCorrectionCountsTheLevelsReallyDrafted) {
  for (const bool pipeline : {false, true}) {
    RouterOptions options;
    options.pipeline = pipeline;
    Harness h("static:2", options);
    h.drafters[0] = std::make_unique<FakeDrafter>(0.9, 11);
    h.drafters[0]->seconds_per_level = 0.002;
    LatencyModel model;
    model.set_drafter("pool0", DrafterCost{false, ForwardCoefficients{0.0, 0.0, 0.002}, 0});
    ASSERT_TRUE(BuildWithModel(h, "static:2", options, model));
    auto id = h.Submit(Prompt(50, 9), 60);
    ASSERT_TRUE(id.ok());
    h.RunUntilIdle();
    EXPECT_EQ(h.out[*id].tokens, ReferenceGeneration(Prompt(50, 9), 60));
    const ServerInfo info = h.core->Snapshot();
    if (pipeline) {
      EXPECT_GT(info.draft_ahead_used, 0);
    }
    EXPECT_NEAR(info.latency_refit["draft_scales"]["pool0"].get<double>(), 1.0, 1e-6) << "pipeline " << pipeline;
  }
}

// A chain gets its guess (one level more, for a draft made ahead to build on) only where the
// Propose a hit saves outweighs that level: with a drafter whose chains land, every Propose
// after the first drafts 4 levels for static:3; with one whose chains never land, the
// acceptance estimate falls and the chains go back to 3 levels, nothing drafted ahead.
TEST(PipelineTest, TheGuessIsDraftedOnlyWhereDraftingAheadPays) {
  for (const double accuracy : {1.0, 0.0}) {
    RouterOptions options;
    options.pipeline = true;
    Harness h("static:3", options);
    h.drafters[0] = std::make_unique<FakeDrafter>(accuracy, 11);
    ASSERT_TRUE(BuildWithModel(h, "static:3", options, DraftsFitTheVerifyModel()));
    auto id = h.Submit(Prompt(50, 9), 80);
    ASSERT_TRUE(id.ok());
    h.RunUntilIdle();
    EXPECT_EQ(h.out[*id].tokens, ReferenceGeneration(Prompt(50, 9), 80));
    // The calls' depths in the second half of the generation, when the estimate has settled.
    const auto& sent = h.drafters[0]->sent[*id];
    ASSERT_GT(sent.size(), 8u);
    std::set<int32_t> late_depths;
    for (size_t c = sent.size() / 2; c + 2 < sent.size(); ++c) late_depths.insert(sent[c].depth);
    const ServerInfo info = h.core->Snapshot();
    if (accuracy == 1.0) {
      EXPECT_EQ(late_depths, std::set<int32_t>{4});
      EXPECT_GE(info.draft_ahead_used, info.steps - 3);
    } else {
      EXPECT_EQ(late_depths, std::set<int32_t>{3});
      EXPECT_LT(info.draft_ahead_dropped, info.steps / 2);
    }
  }
}

// A draft made ahead with alternatives drafts one more chain per alternative, but a hit spares
// the next step only its own Propose: one chain. Under a model where one chain of 4 levels (1.6
// ms) fits in the 5 ms verify call and five (8 ms) outlast it by 3 ms, a request whose drafts
// all land drafts every step ahead with the hypothesis alone, four alternatives allowed or
// none (RouterCore::BestDraftAhead: five chains would have each step wait 3 ms to spare 1.6,
// for misses this drafter does not make). A first request makes the policy's depth known, so
// that the second one's prefill drafts its first decode step ahead (router_prefill_drafts.cc).
TEST(PipelineTest, AHitIsWorthTheProposeItSparesNotTheAlternativesDraftedBesideIt) {
  LatencyModel model;
  model.set_target({0.0, 0.0, 0.005});
  model.set_drafter("pool0", DrafterCost{false, ForwardCoefficients{0.0, 0.0004, 0.0}, 0});
  model.set_rpc_seconds(0.0001);
  for (const int32_t alternatives : {0, 4}) {
    SCOPED_TRACE(alternatives);
    RouterOptions options;
    options.pipeline = true;
    options.draft_ahead_alternatives = alternatives;
    Harness h("static:3", options);
    h.drafters[0] = std::make_unique<FakeDrafter>(1.0, 11);
    ASSERT_TRUE(BuildWithModel(h, "static:3", options, model));
    ASSERT_TRUE(h.Submit(Prompt(40, 7), 24).ok());
    h.RunUntilIdle();
    const int beside_before = h.drafters[0]->beside_verify_calls;
    const int64_t alternatives_before = h.drafters[0]->alternatives_asked;
    const int64_t steps_before = h.core->Snapshot().steps;
    auto id = h.Submit(Prompt(50, 9), 60);
    ASSERT_TRUE(id.ok());
    h.RunUntilIdle();
    EXPECT_EQ(h.out[*id].tokens, ReferenceGeneration(Prompt(50, 9), 60));
    const int beside = h.drafters[0]->beside_verify_calls - beside_before;
    const int64_t steps = h.core->Snapshot().steps - steps_before;
    ASSERT_GT(steps, 10);
    EXPECT_GE(beside, steps - 2);  // every step but the last drafts the next one ahead
    EXPECT_EQ(h.drafters[0]->alternatives_asked, alternatives_before);  // with the hypothesis alone
  }
}


// Each request's draft made ahead is judged on its own chains first, but a step's are one
// call: under a model where one request's (its 4 tokens fed, then 3 more levels: 2.8 ms) fits
// in the 5 ms verify call and four requests' together (16 tokens fed, then 3 levels of 4:
// 11.2 ms) outlast it by more than what their hits spare (1.7 ms each), a step of four drafts
// ahead for some of them, not all (RouterCore::KeepMembersThatPay), and the outputs stay the
// target's.
TEST(PipelineTest, AStepDraftsAheadForNoMoreRequestsThanTheCallPaysFor) {
  LatencyModel model;
  model.set_target({0.0, 0.0, 0.005});
  model.set_drafter("pool0", DrafterCost{false, ForwardCoefficients{0.0, 0.0004, 0.0}, 0});
  model.set_rpc_seconds(0.0001);
  RouterOptions options;
  options.pipeline = true;
  Harness h("static:3", options);
  h.drafters[0] = std::make_unique<FakeDrafter>(1.0, 11);
  ASSERT_TRUE(BuildWithModel(h, "static:3", options, model));
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) {
    auto id = h.Submit(Prompt(40 + i, 7 + i), 60);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  h.RunUntilIdle();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(h.out[ids[i]].tokens, ReferenceGeneration(Prompt(40 + i, 7 + i), 60));
  const std::vector<size_t>& sizes = h.drafters[0]->decode_ahead_call_sizes;
  ASSERT_FALSE(sizes.empty());
  EXPECT_LT(*std::max_element(sizes.begin(), sizes.end()), 4u);
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty()) << h.drafters[0]->protocol_errors[0];
  // The drafts made ahead's own correction, learnt from them, is reported beside the serial one.
  const nlohmann::json refit = h.core->Snapshot().latency_refit;
  ASSERT_TRUE(refit.contains("draft_ahead_scales"));
  EXPECT_GT(refit["draft_ahead_scales"]["pool0"].get<double>(), 0.0);
  EXPECT_TRUE(refit["draft_scales"].contains("pool0"));
}

// A policy that deepens and shortens its chains by turns: 3, 2, 3, 2, ... (a goodput policy
// between two depths of near-equal value does this every few steps).
class AlternatingDepths : public SpeculationPolicy {
 public:
  std::string Name() const override { return "alternating"; }
  std::vector<int32_t> Decide(const PolicyInput& input) override {
    depth_ = depth_ == 2 ? 3 : 2;
    return std::vector<int32_t>(input.requests.size(), depth_);
  }
  nlohmann::json Describe() const override { return nlohmann::json::object(); }

 private:
  int32_t depth_ = 2;
};

// A chain one deeper than the draft made ahead for it would use that draft whole and keep no
// guess, so the step after it would wait for a serial Propose. It verifies one token less
// instead, and the next draft goes ahead to the depth the policy chose: with a drafter whose
// chains land, every step after the first uses a draft made ahead, whichever depth the policy
// asks for, and the output is the target's.
TEST(PipelineTest, AChainAsDeepAsTheDraftMadeAheadKeepsAGuess) {
  RouterOptions options;
  options.pipeline = true;
  Harness h("static:3", options);
  h.drafters[0] = std::make_unique<FakeDrafter>(1.0, 11);
  h.core = std::make_unique<RouterCore>(options, &h.verifier, DrafterPools{{"pool0", h.drafters[0].get()}},
                                        std::make_unique<AlternatingDepths>(), DraftsFitTheVerifyModel(), &h.clock);
  ASSERT_TRUE(h.core->Init().ok());
  auto id = h.Submit(Prompt(50, 9), 80);
  ASSERT_TRUE(id.ok());
  h.RunUntilIdle();
  EXPECT_EQ(h.out[*id].tokens, ReferenceGeneration(Prompt(50, 9), 80));
  const ServerInfo info = h.core->Snapshot();
  EXPECT_EQ(info.draft_ahead_dropped, 0);
  EXPECT_GE(info.draft_ahead_used, info.steps - 2);
  EXPECT_LE(h.drafters[0]->calls, static_cast<int>(info.steps) + 1);
  // Both depths the policy asks for are drafted ahead (its 2 with a guess: 3 levels; its 3,
  // verified as 2 after a draft of 3, with a guess: 4 levels).
  std::set<int32_t> depths;
  const auto& sent = h.drafters[0]->sent[*id];
  for (size_t c = 2; c + 2 < sent.size(); ++c) depths.insert(sent[c].depth);
  EXPECT_EQ(depths, (std::set<int32_t>{3, 4}));
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty()) << h.drafters[0]->protocol_errors[0];
}

// With alternatives the draft made ahead also covers the outcomes where the hypothesis fails
// (this fake drafter's other outcomes: each position's other token, always right where the
// hypothesis was wrong). With one for each position of a static:3 hypothesis (chain and guess)
// every outcome is drafted for: a request's drafts made ahead are dropped at most when it
// finishes, many are kept for an outcome other than the hypothesis, and the output is the
// target's token for token.
TEST(PipelineTest, AlternativesCatchTheOutcomesTheHypothesisMissed) {
  const PipelineRun hypothesis_only = RunPipelined(0.6, 4, 40, /*pipeline=*/true, /*work_inside_verify=*/false,
                                                   /*alternatives=*/0);
  const PipelineRun covered = RunPipelined(0.6, 4, 40, /*pipeline=*/true, /*work_inside_verify=*/false,
                                           /*alternatives=*/4);
  EXPECT_GT(covered.alternatives_asked, 0);
  EXPECT_GT(covered.info.draft_ahead_alternatives_held, 0);
  EXPECT_LE(covered.info.draft_ahead_dropped, 4);
  EXPECT_GT(covered.info.draft_ahead_used, hypothesis_only.info.draft_ahead_used);
  EXPECT_LT(covered.info.steps, hypothesis_only.info.steps + 4);  // no step lost to them
  EXPECT_EQ(hypothesis_only.info.draft_ahead_alternatives_held, 0);
  EXPECT_EQ(hypothesis_only.alternatives_asked, 0);
}

// Fewer alternatives than positions: the outcomes left out are dropped as before, and the
// output stays the target's.
TEST(PipelineTest, AnOutcomeNoAlternativeCoversIsDropped) {
  const PipelineRun run = RunPipelined(0.6, 4, 40, /*pipeline=*/true, /*work_inside_verify=*/false,
                                       /*alternatives=*/1);
  EXPECT_GT(run.info.draft_ahead_alternatives_held, 0);
  EXPECT_GT(run.info.draft_ahead_dropped, 4);
}

// A sampled request's drafts made ahead cover other outcomes too (the fake target here emits
// the same tokens whatever the sampling, so the fake drafter's alternatives catch its misses),
// and its output is the target's token for token. Its alternatives' record is its own: the
// greedy rescue rate is untouched by them.
TEST(PipelineTest, SampledRequestsAreDraftedAheadOverOtherOutcomesToo) {
  RouterOptions options;
  options.pipeline = true;
  options.draft_ahead_alternatives = 4;
  Harness h("static:3", options);
  h.drafters[0] = std::make_unique<FakeDrafter>(0.6, 11);
  ASSERT_TRUE(BuildWithModel(h, "static:3", options, DraftsFitTheVerifyModel()));
  GenerateRequest sampled;
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.seed = 5;
  auto id = h.Submit(Prompt(50, 9), 40, sampled);
  ASSERT_TRUE(id.ok());
  h.RunUntilIdle();
  EXPECT_TRUE(h.out[*id].finished);
  EXPECT_EQ(h.out[*id].tokens, ReferenceGeneration(Prompt(50, 9), 40));
  const ServerInfo info = h.core->Snapshot();
  EXPECT_GT(h.drafters[0]->alternatives_asked, 0);
  EXPECT_GT(info.draft_ahead_alternatives_held, 0);
  EXPECT_LE(info.draft_ahead_dropped, 1);  // every outcome covered: at most the last is dropped
  char greedy_prior[32];
  std::snprintf(greedy_prior, sizeof greedy_prior, "rescue %.2f greedy", kAlternativeRescuePrior);
  EXPECT_NE(info.latency_model.find(greedy_prior), std::string::npos) << info.latency_model;
  EXPECT_EQ(info.latency_model.find("0.15 sampled"), std::string::npos) << "nothing learnt for sampled requests";
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty()) << h.drafters[0]->protocol_errors[0];
  EXPECT_TRUE(h.verifier.protocol_errors.empty()) << h.verifier.protocol_errors[0];
}

// Sampled requests cover their own number of other outcomes
// (RouterOptions::draft_ahead_sampled_alternatives), greedy ones theirs: with four for greedy
// requests and one (or none) for sampled ones, a greedy request's drafts made ahead ask for four
// alternatives each (its hypothesis is four tokens long), a sampled request's for one (or
// none, drafting ahead all the same: its chains all land, so the hypothesis alone pays), and
// both outputs are the target's.
TEST(PipelineTest, SampledRequestsCoverTheirOwnNumberOfAlternatives) {
  for (const int32_t sampled_alternatives : {0, 1}) {
    for (const bool greedy : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "sampled alternatives " << sampled_alternatives << ", greedy " << greedy);
      RouterOptions options;
      options.pipeline = true;
      options.draft_ahead_alternatives = 4;
      options.draft_ahead_sampled_alternatives = sampled_alternatives;
      Harness h("static:3", options);
      h.drafters[0] = std::make_unique<FakeDrafter>(1.0, 11);
      ASSERT_TRUE(BuildWithModel(h, "static:3", options, DraftsFitTheVerifyModel()));
      GenerateRequest request;
      if (!greedy) {
        request.sampling.temperature = 0.9f;
        request.sampling.seed = 5;
      }
      auto id = h.Submit(Prompt(50, 9), 40, request);
      ASSERT_TRUE(id.ok());
      h.RunUntilIdle();
      EXPECT_EQ(h.out[*id].tokens, ReferenceGeneration(Prompt(50, 9), 40));
      const int64_t asked = h.drafters[0]->alternatives_asked;
      const int64_t ahead = h.drafters[0]->beside_verify_calls;  // one item each: one request
      ASSERT_GT(ahead, 3);
      if (greedy) {
        EXPECT_GT(asked, 3 * ahead);  // four a draft made ahead, none for the prefill's
        EXPECT_LE(asked, 4 * ahead);
      } else if (sampled_alternatives == 0) {
        EXPECT_EQ(asked, 0);
      } else {
        EXPECT_GT(asked, ahead / 2);
        EXPECT_LE(asked, ahead);
      }
    }
  }
}

// Where drafts made ahead slow the verify call beside them (one GPU for both workers: their
// kernels take turns), the router learns by how much (VerifySlowdown) and stops drafting ahead
// where that outweighs what the drafts save, save for rare probes; where they do not, it keeps
// drafting ahead. The output is the target's either way.
struct SlowdownRun {
  double late_share_beside = 0;  // of the verify calls in the second half of the run
  double extra = 0;              // the slowdown /server_info reports
};

SlowdownRun RunWithVerifySlowdown(double slowdown) {
  RouterOptions options;
  options.pipeline = true;
  options.slowdown_probe_steps = 8;
  double observed_slowdown = -1;  // what the last step's report carried
  options.step_observer = [&observed_slowdown](const StepStats& stats) { observed_slowdown = stats.verify_slowdown; };
  Harness h("static:3", options);
  h.drafters[0] = std::make_unique<FakeDrafter>(0.8, 11);
  h.drafters[0]->seconds_per_level = 0.0005;
  h.drafters[0]->clock = &h.clock;
  h.verifier.overlaps_work = true;
  h.verifier.compute_seconds = 0.01;
  h.verifier.clock = &h.clock;
  h.verifier.beside_counter = &h.drafters[0]->calls;
  h.verifier.slowdown_beside_drafts = slowdown;
  EXPECT_TRUE(BuildWithModel(h, "static:3", options, DraftsFitTheVerifyModel()));
  auto id = h.Submit(Prompt(60, 9), 400);
  EXPECT_TRUE(id.ok());
  h.RunUntilIdle();
  EXPECT_EQ(h.out[*id].tokens, ReferenceGeneration(Prompt(60, 9), 400));
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty()) << h.drafters[0]->protocol_errors[0];
  EXPECT_TRUE(h.verifier.protocol_errors.empty()) << h.verifier.protocol_errors[0];
  SlowdownRun run;
  const std::vector<bool>& beside = h.verifier.beside_drafts;
  EXPECT_GT(beside.size(), 60u);
  const size_t half = beside.size() / 2;
  for (size_t i = half; i < beside.size(); ++i) run.late_share_beside += beside[i] ? 1.0 : 0.0;
  run.late_share_beside /= static_cast<double>(beside.size() - half);
  run.extra = h.core->Snapshot().latency_refit["draft_ahead_verify_slowdown"]["extra"].get<double>();
  EXPECT_EQ(observed_slowdown, run.extra);
  return run;
}

TEST(PipelineTest, DraftsMadeAheadStopWhereTheySlowTheVerifierMoreThanTheySave) {
  const SlowdownRun slowed = RunWithVerifySlowdown(3.0);
  EXPECT_NEAR(slowed.extra, 2.0, 0.2);
  EXPECT_LT(slowed.late_share_beside, 0.1);
  const SlowdownRun unslowed = RunWithVerifySlowdown(1.0);
  EXPECT_LT(unslowed.extra, 0.05);
  EXPECT_GT(unslowed.late_share_beside, 0.5);
}

// A policy whose chains depend on each request's context alone (2 + context % 2 tokens: never
// deeper than the draft made ahead after the step before), so
// that two runs over the same fakes take the same steps; it logs what each step's decision was
// taken on: the input it decided, or the one it priced ahead and then recorded.
class ContextChains : public SpeculationPolicy {
 public:
  // Per request (ids differ from run to run): prompt, context, remaining tokens, useful k,
  // catch-up, must run, speculative, history length and last token, its acceptance estimate and
  // its pool's.
  using Key = std::vector<std::array<double, 11>>;

  explicit ContextChains(bool prices_ahead) : prices_ahead_(prices_ahead) {}
  std::string Name() const override { return "context-chains"; }
  std::vector<int32_t> Decide(const PolicyInput& input) override {
    std::vector<int32_t> k;
    for (const ProposalChoice& c : Choose(input)) k.push_back(c.depth);
    return k;
  }
  std::vector<ProposalChoice> DecideProposals(const PolicyInput& input) override {
    taken.push_back(KeyOf(input));
    return Choose(input);
  }
  bool PricesAhead() const override { return prices_ahead_; }
  std::unique_ptr<PricedProposals> PriceProposals(const PolicyInput& input) const override {
    if (!prices_ahead_) return nullptr;
    auto priced = std::make_unique<Logged>();
    priced->key = KeyOf(input);
    priced->choices = Choose(input);
    return priced;
  }
  std::vector<ProposalChoice> RecordProposals(std::unique_ptr<PricedProposals> priced) override {
    auto& logged = static_cast<Logged&>(*priced);
    taken.push_back(logged.key);
    ++recorded;
    return std::move(logged.choices);
  }
  nlohmann::json Describe() const override { return nlohmann::json::object(); }

  std::vector<Key> taken;
  int recorded = 0;

 private:
  struct Logged : PricedProposals {
    Key key;
  };
  static std::vector<ProposalChoice> Choose(const PolicyInput& input) {
    std::vector<ProposalChoice> choices;
    for (const PolicyRequest& r : input.requests) {
      const int32_t depth = r.speculative ? std::min(2 + r.context_tokens % 2, r.max_useful_k) : 0;
      choices.push_back(ProposalChoice::Chain(depth));
    }
    return choices;
  }
  static Key KeyOf(const PolicyInput& input) {
    Key key;
    for (const PolicyRequest& r : input.requests) {
      key.push_back({static_cast<double>(r.prompt_tokens), static_cast<double>(r.context_tokens),
                     static_cast<double>(r.remaining_tokens), static_cast<double>(r.max_useful_k),
                     static_cast<double>(r.draft_catch_up), static_cast<double>(r.must_run),
                     static_cast<double>(r.speculative), static_cast<double>(r.history.size()),
                     r.history.empty() ? -1.0 : static_cast<double>(r.history.back()), r.acceptance,
                     input.acceptance != nullptr ? input.acceptance->Pool(r.pool) : -1.0});
    }
    return key;
  }
  const bool prices_ahead_;
};

struct DecidedRun {
  std::vector<ContextChains::Key> taken;
  int recorded = 0;
  int64_t made_ahead = 0;
  int64_t steps = 0;
};

// `spoil_guesses`: every third draft ends in a wrong token, so that a step often accepts the
// whole chain and then emits a token other than the guess: the context grows as assumed, the
// history does not.
DecidedRun RunContextChains(bool prices_ahead, bool work_inside_verify, double accuracy, int n_requests,
                            bool spoil_guesses = false) {
  RouterOptions options;
  options.pipeline = true;
  Harness h("static:3", options);
  h.verifier.overlaps_work = work_inside_verify;
  h.drafters[0] = std::make_unique<FakeDrafter>(accuracy, 11);
  auto policy = std::make_unique<ContextChains>(prices_ahead);
  ContextChains* log = policy.get();
  h.core = std::make_unique<RouterCore>(options, &h.verifier, DrafterPools{{"pool0", h.drafters[0].get()}},
                                        std::move(policy), LatencyModel(), &h.clock);
  EXPECT_TRUE(h.core->Init().ok());
  std::vector<RequestId> ids;
  int drafts = 0;
  for (int i = 0; i < n_requests; ++i) {
    auto id = h.Submit(Prompt(60 + i, 9 + i), 40 + 5 * i);
    EXPECT_TRUE(id.ok());
    ids.push_back(*id);
    if (spoil_guesses) {
      h.drafters[0]->spoil_drafts[*id] = [&drafts](spec::DraftProposal& d) {
        if (++drafts % 3 == 0 && !d.tokens.empty()) d.tokens.back() = (d.tokens.back() + 1) % kFakeVocab;
      };
    }
  }
  h.RunUntilIdle();
  for (int i = 0; i < n_requests; ++i) {
    EXPECT_EQ(h.out[ids[i]].tokens, ReferenceGeneration(Prompt(60 + i, 9 + i), 40 + 5 * i)) << "request " << i;
  }
  for (const std::string& e : h.drafters[0]->protocol_errors) ADD_FAILURE() << e;
  const ServerInfo info = h.core->Snapshot();
  return {log->taken, log->recorded, info.decisions_made_ahead, info.steps};
}

// A decision priced beside the verify call is taken only for the step it was priced for: the
// same run with and without pricing ahead takes every step's decision on the same input (the
// histories the priced ones assumed and the acceptance estimates included), while the first takes many of them priced
// ahead: every step's but the first when every draft lands, and some when some miss (one
// request; with three, all three seldom hold at once), or when a whole chain is followed by a
// token other than the guess. With drafts that never land, none.
TEST(PipelineTest, ADecisionPricedAheadIsTakenOnlyForTheStepItAssumed) {
  for (const bool inside : {false, true}) {
    for (const int n : {1, 3}) {
      for (const double accuracy : {1.0, 0.95}) {
        const DecidedRun ahead = RunContextChains(/*prices_ahead=*/true, inside, accuracy, n);
        const DecidedRun decided = RunContextChains(/*prices_ahead=*/false, inside, accuracy, n);
        const std::string run = absl::StrCat("inside ", inside, ", ", n, " requests, accuracy ", accuracy);
        EXPECT_EQ(ahead.taken, decided.taken) << run;
        EXPECT_EQ(ahead.steps, decided.steps) << run;
        EXPECT_EQ(decided.recorded, 0) << run;
        EXPECT_EQ(ahead.made_ahead, ahead.recorded) << run;
        if (accuracy == 1.0) {
          EXPECT_GT(ahead.recorded, ahead.steps / 2) << run;
        } else if (n == 1) {
          EXPECT_GT(ahead.recorded, 0) << run;
          EXPECT_LT(ahead.recorded, ahead.steps / 2) << run;
        }
      }
    }
    EXPECT_EQ(RunContextChains(/*prices_ahead=*/true, inside, 0.0, 1).recorded, 0);
    // Whole chains with the wrong token after them: as long as assumed, not the history assumed.
    const DecidedRun ahead = RunContextChains(/*prices_ahead=*/true, inside, 1.0, 1, /*spoil_guesses=*/true);
    const DecidedRun decided = RunContextChains(/*prices_ahead=*/false, inside, 1.0, 1, /*spoil_guesses=*/true);
    EXPECT_EQ(ahead.taken, decided.taken) << "inside " << inside << ", guesses spoilt";
    EXPECT_GT(ahead.recorded, 0);
    EXPECT_LT(ahead.recorded, ahead.steps - 2);
  }
}

// smartspec prices ahead: through the pipeline its outputs stay the target's, and the steps
// whose drafts made ahead all held take the decision priced beside their verify call. (Chains
// only: a tree has no guess to draft ahead from.)
TEST(PipelineTest, SmartspecTakesDecisionsPricedAheadAndStaysExact) {
  RouterOptions options;
  options.pipeline = true;
  Harness h("static:3", options);
  h.verifier.overlaps_work = true;
  h.drafters[0] = std::make_unique<FakeDrafter>(0.9, 11);
  auto policy = MakePolicy("smartspec", {{"trees", false}});
  ASSERT_TRUE(policy.ok());
  h.core = std::make_unique<RouterCore>(options, &h.verifier, DrafterPools{{"pool0", h.drafters[0].get()}},
                                        std::move(*policy), DraftsFitTheVerifyModel(), &h.clock);
  ASSERT_TRUE(h.core->Init().ok());
  // One request at a time, as at one client: each step's draft made ahead is the whole batch's.
  for (int i = 0; i < 3; ++i) {
    auto id = h.Submit(Prompt(80 + i, 8 + i), 60);
    ASSERT_TRUE(id.ok());
    h.RunUntilIdle();
    EXPECT_EQ(h.out[*id].tokens, ReferenceGeneration(Prompt(80 + i, 8 + i), 60)) << "request " << i;
  }
  const ServerInfo info = h.core->Snapshot();
  EXPECT_GT(info.draft_ahead_used, 0);
  EXPECT_GT(info.decisions_made_ahead, 0);
  EXPECT_LT(info.decisions_made_ahead, info.steps);
}

TEST(PipelineTest, OffMeansNoDraftAhead) {
  const PipelineRun run = RunPipelined(0.8, 2, 30, /*pipeline=*/false);
  EXPECT_EQ(run.info.draft_ahead_used, 0);
  EXPECT_EQ(run.info.draft_ahead_dropped, 0);
}

}  // namespace
}  // namespace splitspec::router::testing
