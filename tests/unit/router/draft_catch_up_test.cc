// PolicyRequest::draft_catch_up (the tokens a request's drafter must feed before drafting,
// beyond a steady step's one) and remaining_tokens, as the core reports them to the policy.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "router/policy.h"
#include "tests/unit/router/router_harness.h"

namespace splitspec::router::testing {
namespace {

// Drafts k = script[step] (the last entry once the script runs out) and records what the core
// told it about the first request.
class ScriptedPolicy : public SpeculationPolicy {
 public:
  explicit ScriptedPolicy(std::vector<int32_t> script) : script_(std::move(script)) {}
  std::string Name() const override { return "scripted"; }
  std::vector<int32_t> Decide(const PolicyInput& input) override {
    const int32_t k = script_[std::min(step_++, script_.size() - 1)];
    if (!input.requests.empty()) {
      catch_up.push_back(input.requests[0].draft_catch_up);
      context.push_back(input.requests[0].context_tokens);
      remaining.push_back(input.requests[0].remaining_tokens);
    }
    return std::vector<int32_t>(input.requests.size(), k);
  }
  nlohmann::json Describe() const override { return nlohmann::json::object(); }

  std::vector<int32_t> catch_up, context, remaining;

 private:
  std::vector<int32_t> script_;
  size_t step_ = 0;
};

TEST(DraftCatchUpTest, CountsTheTokensCommittedWithoutDrafting) {
  Harness h("none");
  // Every draft is rejected, so each step commits exactly one token whatever k was.
  h.drafters[0]->set_accuracy(0.0);
  auto owned = std::make_unique<ScriptedPolicy>(std::vector<int32_t>{2, 0, 0, 2, 0, 2});
  const ScriptedPolicy& policy = *owned;
  h.core = std::make_unique<RouterCore>(RouterOptions{}, &h.verifier, DrafterPools{{"pool0", h.drafters[0].get()}},
                                        std::move(owned), LatencyModel(), &h.clock);
  ASSERT_TRUE(h.core->Init().ok());
  auto id = h.Submit(Prompt(7, 9), 8);
  ASSERT_TRUE(id.ok());
  h.RunUntilIdle();
  ASSERT_GE(policy.catch_up.size(), 6u);
  // No session with the drafter yet: the whole history (the prompt and the first token).
  EXPECT_EQ(policy.context[0], 10);
  EXPECT_EQ(policy.catch_up[0], 10);
  EXPECT_EQ(policy.catch_up[1], 0);  // it drafted in the step before
  EXPECT_EQ(policy.catch_up[2], 1);  // one plain step
  EXPECT_EQ(policy.catch_up[3], 2);  // two
  EXPECT_EQ(policy.catch_up[4], 0);
  EXPECT_EQ(policy.catch_up[5], 1);
  // The prefill produced the first of its 8 tokens; each step since one more.
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(policy.remaining[i], 7 - static_cast<int32_t>(i)) << "step " << i;
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty());
}

}  // namespace
}  // namespace splitspec::router::testing
