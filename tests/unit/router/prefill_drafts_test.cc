// The drafters' side of a prefill (router/router_prefill_drafts.cc), with in-process fakes: a
// new request's pool prefills its history beside the verifier's prefill, so the first decode
// step sends the drafter one token instead of the whole prompt; with the pipeline the same call
// drafts the first decode step on the hypothesis that the target's first token is the
// drafter's guess. Outputs stay the target's token for token either way.
#include <gtest/gtest.h>

#include "tests/unit/router/router_harness.h"

namespace splitspec::router::testing {
namespace {

// Runs one request to its end, then the next: the second arrives after decode steps in which
// the policy drafted, as on a server that has been serving.
std::vector<RequestId> RunOneAfterAnother(Harness& h, const std::vector<int32_t>& prompt_seeds, int32_t max_tokens) {
  std::vector<RequestId> ids;
  for (int32_t seed : prompt_seeds) {
    auto id = h.Submit(Prompt(seed, 9), max_tokens);
    EXPECT_TRUE(id.ok());
    h.RunUntilIdle();
    const Collected& c = h.out[*id];
    EXPECT_EQ(c.tokens, ReferenceGeneration(Prompt(seed, 9), max_tokens)) << "prompt seed " << seed;
    EXPECT_EQ(c.final_event.finish_reason, FinishReason::kLength);
    if (h.drafters[0]->proposed_ids.count(*id)) {
      EXPECT_TRUE(h.drafters[0]->released.count(*id));
    }
    ids.push_back(*id);
  }
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty()) << h.drafters[0]->protocol_errors[0];
  EXPECT_TRUE(h.verifier.protocol_errors.empty()) << h.verifier.protocol_errors[0];
  return ids;
}

TEST(PrefillDraftTest, ThePoolPrefillsANewRequestBesideTheVerifier) {
  Harness h("static:3");  // the fake drafter cross-checks its history against the verifier's
  ASSERT_TRUE(h.core->Init().ok());
  const std::vector<RequestId> ids = RunOneAfterAnother(h, {3, 4}, 20);
  const auto& first = h.drafters[0]->sent[ids[0]];
  const auto& second = h.drafters[0]->sent[ids[1]];
  ASSERT_GE(first.size(), 1u);
  ASSERT_GE(second.size(), 2u);
  // The first request came before any step had drafted: its first decode step sends the prompt
  // and the prefill's token.
  EXPECT_EQ(first[0].new_tokens, 10);
  // The second: the prompt beside the prefill (prefilling only, nothing drafted ahead without
  // the pipeline), then the first decode step sends the prefill's token alone.
  EXPECT_EQ(second[0].new_tokens, 9);
  EXPECT_EQ(second[0].depth, 1);
  EXPECT_EQ(second[1].new_tokens, 1);
  EXPECT_EQ(second[1].depth, 3);
  EXPECT_EQ(h.drafters[0]->prefill_proposes, 1);
}

// static:3 with the pipeline and a fake drafter of this accuracy. It is not cross-checked
// against the verifier (drafts made ahead hold hypothetical tokens by design); a known length
// past what it holds would still show as a protocol error.
void UsePipelinedDrafter(Harness& h, double accuracy) {
  RouterOptions options;
  options.pipeline = true;
  h.drafters[0] = std::make_unique<FakeDrafter>(accuracy, 11);
  h.Build("static:3", options, nlohmann::json::object());
  ASSERT_TRUE(h.core->Init().ok());
}

TEST(PrefillDraftTest, WithThePipelineARightGuessDraftsTheFirstDecodeStep) {
  Harness h("static:3");
  UsePipelinedDrafter(h, 1.0);
  // The same prompt twice: the same steps, so the two runs differ only in the prefill's draft.
  auto first = h.Submit(Prompt(5, 9), 40);
  ASSERT_TRUE(first.ok());
  h.RunUntilIdle();
  const ServerInfo after_first = h.core->Snapshot();
  auto second = h.Submit(Prompt(5, 9), 40);
  ASSERT_TRUE(second.ok());
  h.RunUntilIdle();
  const ServerInfo after_second = h.core->Snapshot();
  EXPECT_EQ(h.out[*first].tokens, ReferenceGeneration(Prompt(5, 9), 40));
  EXPECT_EQ(h.out[*second].tokens, ReferenceGeneration(Prompt(5, 9), 40));
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty()) << h.drafters[0]->protocol_errors[0];
  const int64_t steps_first = after_first.steps;
  ASSERT_EQ(after_second.steps - after_first.steps, steps_first);
  // The first request's first decode step waited for a Propose (as did any step before its
  // acceptance estimate rose enough for a guess to pay); every decode step of the second used
  // a draft made ahead, the first of them the one made during the prefill.
  EXPECT_LE(after_first.draft_ahead_used, steps_first - 1);
  EXPECT_EQ(after_second.draft_ahead_used - after_first.draft_ahead_used, steps_first);
  EXPECT_EQ(after_second.draft_ahead_dropped, 0);
  const auto& sent = h.drafters[0]->sent[*second];
  ASSERT_GE(sent.size(), 2u);
  EXPECT_EQ(sent[0].new_tokens, 9);
  EXPECT_EQ(sent[0].depth, 5);  // the guess, a chain of 3 and the chain's guess
  // The next Propose (a draft-ahead) starts with the prefill's token, then chain and guess.
  EXPECT_EQ(sent[1].new_tokens, 1 + 3 + 1);
  EXPECT_TRUE(h.drafters[0]->released.count(*second));
}

TEST(PrefillDraftTest, WithThePipelineAWrongGuessIsDroppedAndTheDrafterCatchesUp) {
  Harness h("static:3");
  UsePipelinedDrafter(h, 0.0);
  const std::vector<RequestId> ids = RunOneAfterAnother(h, {6, 7}, 20);
  const ServerInfo info = h.core->Snapshot();
  EXPECT_EQ(info.draft_ahead_used, 0);
  EXPECT_GT(info.draft_ahead_dropped, 0);
  const auto& second = h.drafters[0]->sent[ids[1]];
  ASSERT_GE(second.size(), 2u);
  EXPECT_EQ(second[0].depth, 5);
  EXPECT_EQ(second[1].new_tokens, 1);  // the prefill's token: the guess was truncated
}

TEST(PrefillDraftTest, NothingBesideThePrefillWhileThePolicyDecodesPlainly) {
  Harness h("none");
  ASSERT_TRUE(h.core->Init().ok());
  RunOneAfterAnother(h, {8, 9}, 12);
  EXPECT_EQ(h.drafters[0]->prefill_proposes, 0);
  EXPECT_TRUE(h.drafters[0]->proposed_ids.empty());
}

TEST(PrefillDraftTest, ARequestThatEndsAtItsPrefillHasItsDrafterSessionReleased) {
  Harness h("static:3");
  ASSERT_TRUE(h.core->Init().ok());
  RunOneAfterAnother(h, {10}, 20);
  auto id = h.Submit(Prompt(11, 9), 1);  // the prefill's token is its only one
  ASSERT_TRUE(id.ok());
  h.RunUntilIdle();
  EXPECT_EQ(h.out[*id].tokens, ReferenceGeneration(Prompt(11, 9), 1));
  EXPECT_EQ(h.drafters[0]->prefill_proposes, 1);
  EXPECT_TRUE(h.drafters[0]->released.count(*id));
  EXPECT_FALSE(h.drafters[0]->sessions.count(*id));
}

}  // namespace
}  // namespace splitspec::router::testing
