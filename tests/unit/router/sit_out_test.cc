// Requests sitting out steps (SmartSpec's candidate batches): the core keeps their worker
// state intact, never lets one sit out more than RouterOptions::max_sit_out_steps steps in a
// row whatever the policy asks, and SmartSpec picks shorter prefixes only when its latency
// model says they pay.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "router/policy.h"
#include "tests/unit/router/router_harness.h"

namespace splitspec::router::testing {
namespace {

// The most starving policy there is: only the oldest request may run, every step.
class HeadOnlyPolicy : public SpeculationPolicy {
 public:
  explicit HeadOnlyPolicy(int32_t k) : k_(k) {}
  std::string Name() const override { return "head-only"; }
  std::vector<int32_t> Decide(const PolicyInput& input) override {
    std::vector<int32_t> k(input.requests.size(), kSitOut);
    if (!k.empty()) k[0] = k_;
    return k;
  }
  nlohmann::json Describe() const override { return nlohmann::json::object(); }

 private:
  int32_t k_;
};

// Asks for nobody at all.
class NobodyPolicy : public SpeculationPolicy {
 public:
  std::string Name() const override { return "nobody"; }
  std::vector<int32_t> Decide(const PolicyInput& input) override {
    return std::vector<int32_t>(input.requests.size(), kSitOut);
  }
  nlohmann::json Describe() const override { return nlohmann::json::object(); }
};

// Which decode steps forwarded which request, from the core's observers.
struct Schedule {
  int64_t next_step = 0;
  std::map<RequestId, int64_t> admitted;                // the decode step right after prefill
  std::map<RequestId, std::vector<int64_t>> forwarded;  // decode steps that verified it
  int64_t sat_out = 0;
  int32_t min_batch = 1 << 30;

  void Attach(RouterOptions* opt) {
    opt->admission_observer = [this](RequestId id, double, int32_t) { admitted[id] = next_step; };
    opt->step_observer = [this](const StepStats& s) {
      for (const RequestOutcome& r : s.requests) forwarded[r.id].push_back(s.step);
      sat_out += s.sat_out;
      min_batch = std::min(min_batch, s.batch_size);
      next_step = s.step + 1;
    };
  }
  // The longest run of consecutive decode steps `id` sat out while it was running.
  int64_t LongestWait(RequestId id) const {
    int64_t prev = admitted.at(id) - 1, longest = 0;
    for (int64_t s : forwarded.at(id)) {
      longest = std::max(longest, s - prev - 1);
      prev = s;
    }
    return longest;
  }
};

void Rebuild(Harness& h, RouterOptions opt, std::unique_ptr<SpeculationPolicy> policy,
             LatencyModel model = LatencyModel()) {
  h.core = std::make_unique<RouterCore>(std::move(opt), &h.verifier,
                                        DrafterPools{{"pool0", h.drafters[0].get()}},
                                        std::move(policy), std::move(model), &h.clock);
  ASSERT_TRUE(h.core->Init().ok());
}

void ExpectCleanWorkers(const Harness& h) {
  for (const auto& d : h.drafters) {
    EXPECT_TRUE(d->protocol_errors.empty()) << d->protocol_errors[0];
    EXPECT_TRUE(d->sessions.empty());
  }
  EXPECT_TRUE(h.verifier.protocol_errors.empty()) << h.verifier.protocol_errors[0];
  EXPECT_TRUE(h.verifier.sessions.empty());
}

class StarvationTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(StarvationTest, NoRequestSitsOutLongerThanTheBound) {
  const int32_t bound = GetParam();
  Harness h("none");
  Schedule sched;
  RouterOptions opt;
  opt.max_sit_out_steps = bound;
  sched.Attach(&opt);
  Rebuild(h, opt, std::make_unique<HeadOnlyPolicy>(2));
  std::map<RequestId, std::vector<int32_t>> expected;
  for (int i = 0; i < 6; ++i) {
    const int32_t len = 4 + 5 * i, n = 12 + 7 * i;
    auto id = h.Submit(Prompt(400 + i, len), n);
    ASSERT_TRUE(id.ok());
    expected[*id] = ReferenceGeneration(Prompt(400 + i, len), n);
    if (i == 2) h.core->RunStep();  // a second wave joins a running batch
  }
  h.RunUntilIdle();
  for (const auto& [id, ref] : expected) {
    EXPECT_EQ(h.out[id].tokens, ref) << "request " << id;
    EXPECT_EQ(h.out[id].final_event.finish_reason, FinishReason::kLength);
  }
  ExpectCleanWorkers(h);
  EXPECT_GT(sched.sat_out, 0);
  int64_t longest = 0;
  for (const auto& [id, ref] : expected) {
    const int64_t w = sched.LongestWait(id);
    EXPECT_LE(w, bound) << "request " << id;
    longest = std::max(longest, w);
  }
  // The policy wanted everyone but the head out for ever: the guard, not luck, set the bound.
  EXPECT_EQ(longest, bound);
}

INSTANTIATE_TEST_SUITE_P(Bounds, StarvationTest, ::testing::Values(1, 3));

TEST(SitOutTest, ZeroBoundMeansNobodySitsOut) {
  Harness h("none");
  Schedule sched;
  RouterOptions opt;
  opt.max_sit_out_steps = 0;
  sched.Attach(&opt);
  Rebuild(h, opt, std::make_unique<HeadOnlyPolicy>(1));
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i) {
    auto id = h.Submit(Prompt(500 + i, 6), 10 + i);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  h.RunUntilIdle();
  EXPECT_EQ(sched.sat_out, 0);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(h.out[ids[i]].tokens, ReferenceGeneration(Prompt(500 + i, 6), 10 + i));
  }
  ExpectCleanWorkers(h);
}

TEST(SitOutTest, AStepForwardsSomebodyEvenIfThePolicyAsksForNobody) {
  Harness h("none");
  Schedule sched;
  RouterOptions opt;
  opt.max_sit_out_steps = 1000;
  sched.Attach(&opt);
  Rebuild(h, opt, std::make_unique<NobodyPolicy>());
  std::vector<RequestId> ids;
  for (int i = 0; i < 3; ++i) {
    auto id = h.Submit(Prompt(600 + i, 5), 8);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  h.RunUntilIdle(/*max_steps=*/200);
  EXPECT_GE(sched.min_batch, 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(h.out[ids[i]].tokens, ReferenceGeneration(Prompt(600 + i, 5), 8));
  }
  ExpectCleanWorkers(h);
}

// Context-dominated target cost: a request with a 50x longer context than the rest costs
// more per expected token than the others average, so goodput leaves it out when it can.
LatencyModel ExpensiveContextModel() {
  LatencyModel m;
  m.set_target({1e-5, 1e-4, 1e-3});
  m.set_drafter("default", DrafterCost{false, {0, 1e-5, 1e-4}, 0});
  m.set_rpc_seconds(0);
  return m;
}

struct SmartSpecRun {
  int64_t short_prefix_steps = 0;
  int64_t sat_out = 0;
  int64_t longest_wait = 0;
};

SmartSpecRun RunSmartSpec(const std::string& granularity, bool prefix_search,
                          const std::vector<int32_t>& prompt_lens) {
  Harness h("none");
  Schedule sched;
  RouterOptions opt;
  opt.max_k = 4;
  sched.Attach(&opt);
  auto policy = MakePolicy("smartspec", {{"granularity", granularity},
                                         {"prefix_search", prefix_search}});
  EXPECT_TRUE(policy.ok());
  Rebuild(h, opt, std::move(*policy), ExpensiveContextModel());
  std::map<RequestId, std::vector<int32_t>> expected;
  for (size_t i = 0; i < prompt_lens.size(); ++i) {
    auto id = h.Submit(Prompt(700 + static_cast<int32_t>(i), prompt_lens[i]), 24);
    EXPECT_TRUE(id.ok());
    expected[*id] = ReferenceGeneration(Prompt(700 + static_cast<int32_t>(i), prompt_lens[i]), 24);
  }
  h.RunUntilIdle();
  SmartSpecRun run;
  for (const auto& [id, ref] : expected) {
    EXPECT_EQ(h.out[id].tokens, ref) << "request " << id;
    run.longest_wait = std::max(run.longest_wait, sched.LongestWait(id));
  }
  ExpectCleanWorkers(h);
  const nlohmann::json state = h.core->Snapshot().policy_state;
  run.short_prefix_steps = state["short_prefix_steps"].get<int64_t>();
  run.sat_out = sched.sat_out;
  EXPECT_EQ(state["sat_out_request_steps"].get<int64_t>(), run.sat_out);
  return run;
}

TEST(SmartSpecPrefixTest, LeavesTheExpensiveTailOutEveryOtherStep) {
  for (const char* g : {"batch", "request"}) {
    const SmartSpecRun run = RunSmartSpec(g, true, {8, 8, 8, 400});
    EXPECT_GT(run.short_prefix_steps, 3) << g;
    EXPECT_GE(run.sat_out, run.short_prefix_steps) << g;
    EXPECT_EQ(run.longest_wait, 1) << g;
  }
}

TEST(SmartSpecPrefixTest, WholeBatchWhenItDoesNotPayOrSearchIsOff) {
  for (const char* g : {"batch", "request"}) {
    // Equal prompts: no prefix beats the whole batch.
    EXPECT_EQ(RunSmartSpec(g, true, {8, 8, 8, 8}).sat_out, 0) << g;
    // The long prompt first: every prefix holds it, and the short ones only help.
    EXPECT_EQ(RunSmartSpec(g, true, {400, 8, 8, 8}).sat_out, 0) << g;
    // The paying case with the search switched off.
    const SmartSpecRun off = RunSmartSpec(g, false, {8, 8, 8, 400});
    EXPECT_EQ(off.sat_out, 0) << g;
    EXPECT_EQ(off.short_prefix_steps, 0) << g;
  }
}

}  // namespace
}  // namespace splitspec::router::testing
