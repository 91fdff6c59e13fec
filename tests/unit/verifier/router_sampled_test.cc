// Sampled output through the router's step loop, in-process: RouterCore over the verifier and
// drafter cores (no gRPC), many seeded requests, and the first tokens each generates compared
// with the target's exact distributions (distribution_check.h). Covers what the core-level
// test (sampled_distribution_test.cc) cannot: the router asking for sampled trees, validating
// and sending them, and the pipeline's drafts made ahead.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "drafter/draft_model_proposer.h"
#include "drafter/drafter_core.h"
#include "router/clock.h"
#include "router/policy.h"
#include "router/router_core.h"
#include "tests/unit/sampling/chi_square.h"
#include "tests/unit/verifier/distribution_check.h"
#include "tests/unit/verifier/test_models.h"
#include "verifier/verifier_core.h"

namespace splitspec::verifier {
namespace {

using splitspec::testing::GetTestModels;
using splitspec::testing::kChiSquareMinPValue;

// The worker contract served straight from the cores.
class CoreVerifier : public router::VerifierClient {
 public:
  explicit CoreVerifier(VerifierCore* core) : core_(core) {}
  absl::StatusOr<std::vector<spec::PrefillResult>> Prefill(const std::vector<spec::PrefillItem>& items) override {
    return core_->Prefill(items);
  }
  absl::StatusOr<spec::VerifyResponse> Verify(const std::vector<spec::VerifyItem>& items) override {
    return core_->Verify(items);
  }
  absl::Status Release(const std::vector<spec::RequestId>& ids) override {
    core_->Release(ids);
    return absl::OkStatus();
  }
  absl::StatusOr<spec::WorkerInfo> Info() override { return core_->Info(); }

 private:
  VerifierCore* core_;
};

class CoreDrafter : public router::DrafterClient {
 public:
  explicit CoreDrafter(drafter::DrafterCore* core) : core_(core) {}
  absl::StatusOr<spec::ProposeResponse> Propose(const std::vector<spec::ProposeItem>& items) override {
    return core_->Propose(items);
  }
  absl::Status Release(const std::vector<spec::RequestId>& ids) override {
    core_->Release(ids);
    return absl::OkStatus();
  }
  absl::StatusOr<spec::WorkerInfo> Info() override { return core_->Info(); }

 private:
  drafter::DrafterCore* core_;
};

struct RouterRun {
  std::vector<Sample> samples;               // tokens `skip`, skip + 1, skip + 2 of each request
  std::vector<std::vector<int32_t>> contexts;  // prompt + the `skip` tokens before them
  router::ServerInfo info;
  int64_t drafted = 0, accepted = 0, steps = 0;
};

// `alternatives`: RouterOptions::draft_ahead_alternatives (with the pipeline).
RouterRun RunThroughRouter(const std::string& policy, bool pipeline, const engine::SamplingParams& params,
                           int n_samples, int32_t max_tokens, size_t skip, int32_t alternatives = 0) {
  VerifierOptions verifier_options;
  verifier_options.model_dir = GetTestModels().target_dir;
  verifier_options.kv_blocks = 8 * kBatch;
  verifier_options.n_threads = 1;
  verifier_options.max_draft_tokens = 16;
  auto verifier_core = VerifierCore::Create(verifier_options);
  drafter::DraftModelOptions draft_options;
  draft_options.model_dir = GetTestModels().draft_dir;
  draft_options.kv_blocks = 8 * kBatch;
  draft_options.n_threads = 1;
  auto proposer = drafter::DraftModelProposer::Create(draft_options);
  RouterRun run;
  if (!verifier_core.ok() || !proposer.ok()) {
    ADD_FAILURE() << verifier_core.status() << " / " << proposer.status();
    return run;
  }
  drafter::DrafterOptions drafter_options;
  drafter_options.max_draft_tokens = 16;
  drafter::DrafterCore drafter_core(std::move(*proposer), drafter_options);
  CoreVerifier verifier(verifier_core->get());
  CoreDrafter drafter(&drafter_core);

  router::RouterOptions options;
  options.pipeline = pipeline;
  options.draft_ahead_alternatives = alternatives;
  options.max_running = kBatch;
  options.max_queue = n_samples;
  options.max_k = 16;
  auto made = router::MakePolicy(policy, nlohmann::json::object());
  if (!made.ok()) {
    ADD_FAILURE() << made.status();
    return run;
  }
  router::SteadyClock clock;
  router::RouterCore core(options, std::vector<router::VerifierClient*>{&verifier}, {{"model", &drafter}},
                          std::move(*made), router::LatencyModel(), &clock);
  if (absl::Status s = core.Init(); !s.ok()) {
    ADD_FAILURE() << s;
    return run;
  }
  const std::vector<int32_t> prompt = DraftModelPrompt();
  std::map<router::RequestId, std::vector<int32_t>> tokens;
  std::map<router::RequestId, router::Usage> usage;
  for (int i = 0; i < n_samples; ++i) {
    router::GenerateRequest request;
    request.prompt = prompt;
    request.max_tokens = max_tokens;
    request.ignore_eos = true;
    request.sampling = params;
    request.sampling.seed = static_cast<uint64_t>(i + 1);
    auto id = core.Submit(std::move(request), [&tokens, &usage](const router::StreamEvent& e) {
      std::vector<int32_t>& t = tokens[e.id];
      t.insert(t.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) usage[e.id] = e.usage;
    });
    if (!id.ok()) {
      ADD_FAILURE() << id.status();
      return run;
    }
  }
  for (int guard = 0; guard < 100000 && !core.Idle(); ++guard) core.RunStep();
  EXPECT_TRUE(core.Idle());
  for (const auto& [id, t] : tokens) {
    if (t.size() < skip + 3) {
      ADD_FAILURE() << "request " << id << " produced " << t.size() << " tokens";
      continue;
    }
    run.samples.push_back({t[skip], t[skip + 1], t[skip + 2], -1});
    std::vector<int32_t> context = prompt;
    context.insert(context.end(), t.begin(), t.begin() + static_cast<std::ptrdiff_t>(skip));
    run.contexts.push_back(std::move(context));
    run.drafted += usage[id].drafted_tokens;
    run.accepted += usage[id].accepted_tokens;
    run.steps += usage[id].steps;
  }
  run.info = core.Snapshot();
  return run;
}

engine::SamplingParams TemperatureOne() {
  engine::SamplingParams p;
  p.temperature = 1.0f;
  return p;
}

void ExpectTargetDistributed(const RouterRun& run, const engine::SamplingParams& params, const char* what) {
  const Expected expected = ExactTargetDistributions(run.contexts, run.samples, params);
  const double p1 = PValue(run.samples, expected.t1, &Sample::t1);
  const double p2 = PValue(run.samples, expected.t2, &Sample::t2);
  std::printf("%s: %zu samples, %lld drafted, %lld accepted, p(t1)=%.3g p(t2)=%.3g\n", what, run.samples.size(),
              static_cast<long long>(run.drafted), static_cast<long long>(run.accepted), p1, p2);
  EXPECT_GT(p1, kChiSquareMinPValue) << what;
  EXPECT_GT(p2, kChiSquareMinPValue) << what;
}

constexpr int kRouterSamples = 2000;

TEST(RouterSampledTest, SampledTreesThroughTheRouterMatchTheTarget) {
  const engine::SamplingParams params = TemperatureOne();
  const RouterRun run = RunThroughRouter("static-tree:3:8", /*pipeline=*/false, params, kRouterSamples,
                                         /*max_tokens=*/6, /*skip=*/0);
  ASSERT_EQ(run.samples.size(), static_cast<size_t>(kRouterSamples));
  EXPECT_GT(run.info.steps, 0);
  // Trees were verified: more draft nodes than levels per request-step.
  EXPECT_GT(run.drafted, 3 * (run.steps - kRouterSamples));
  EXPECT_GT(run.accepted, 0);
  ExpectTargetDistributed(run, params, "router, sampled trees 3 levels / 8 nodes");
}

TEST(RouterSampledTest, SampledChainsWithThePipelineMatchTheTarget) {
  // A temperature at which the draft model's chains and guesses often all land, so that many
  // requests continue from drafts made ahead.
  engine::SamplingParams params = TemperatureOne();
  params.temperature = 0.5f;
  // The tokens after the first step's 3 + 1: where the first step's chain and guess held,
  // they come from a draft made ahead.
  const RouterRun run = RunThroughRouter("static:3", /*pipeline=*/true, params, kRouterSamples, /*max_tokens=*/12,
                                         /*skip=*/4);
  ASSERT_EQ(run.samples.size(), static_cast<size_t>(kRouterSamples));
  std::printf("drafts made ahead: %lld used, %lld dropped\n", static_cast<long long>(run.info.draft_ahead_used),
              static_cast<long long>(run.info.draft_ahead_dropped));
  EXPECT_GT(run.info.draft_ahead_used, 200) << "too few drafts made ahead were used to matter";
  ExpectTargetDistributed(run, params, "router, sampled chains of 3, pipeline on");
}

// Drafts made ahead over other outcomes too: where a step's chain stopped at a rejection, the
// next step's draft is sometimes the one made after the token the verifier drew there, which
// must leave the output distributed as the target's all the same. Those steps are a minority of
// the tokens checked here (a few hundred of the 2000 requests' steps), so this run guards the
// path end to end rather than resolving a small bias in it; that an alternative's draft is the
// draft a serial Propose would send, q rows bit for bit, is DraftAheadAlternativesTest's
// (tests/unit/drafter), and serial sampled drafts are what the tests above check.
TEST(RouterSampledTest, SampledChainsWithAlternativesAheadMatchTheTarget) {
  engine::SamplingParams params = TemperatureOne();
  params.temperature = 0.5f;
  const RouterRun run = RunThroughRouter("static:3", /*pipeline=*/true, params, kRouterSamples, /*max_tokens=*/8,
                                         /*skip=*/4, /*alternatives=*/2);
  ASSERT_EQ(run.samples.size(), static_cast<size_t>(kRouterSamples));
  std::printf("drafts made ahead: %lld used, %lld of them kept for an alternative, %lld dropped\n",
              static_cast<long long>(run.info.draft_ahead_used),
              static_cast<long long>(run.info.draft_ahead_alternatives_held),
              static_cast<long long>(run.info.draft_ahead_dropped));
  EXPECT_GT(run.info.draft_ahead_alternatives_held, 200) << "too few alternatives were used to matter";
  ExpectTargetDistributed(run, params, "router, sampled chains of 3, pipeline on, two alternatives");
}

}  // namespace
}  // namespace splitspec::verifier
