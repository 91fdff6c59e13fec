// RouterCore with workers that refuse single items of a batch: only the refused request
// ends (with the worker's code), its batch-mates finish with their solo outputs; the model's
// context limit is enforced at submission and ends a request with kLength when reached.
#include <functional>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/router/router_harness.h"

namespace splitspec::router::testing {
namespace {

constexpr int32_t kNormal = 4;

// Submits kNormal normal requests around the request `bad`, runs to idle, and checks each
// normal one produced exactly its reference output.
void ExpectNormalsUnaffected(Harness& h, const std::vector<RequestId>& normals, int32_t max_tokens) {
  for (size_t i = 0; i < normals.size(); ++i) {
    const Collected& c = h.out[normals[i]];
    EXPECT_TRUE(c.finished);
    EXPECT_EQ(c.final_event.finish_reason, FinishReason::kLength) << c.final_event.status;
    EXPECT_EQ(c.tokens, ReferenceGeneration(Prompt(static_cast<int32_t>(100 + i), 9), max_tokens));
  }
  EXPECT_TRUE(h.verifier.protocol_errors.empty()) << h.verifier.protocol_errors[0];
  EXPECT_TRUE(h.verifier.sessions.empty());
}

std::vector<RequestId> SubmitNormals(Harness& h, int32_t max_tokens) {
  std::vector<RequestId> ids;
  for (int32_t i = 0; i < kNormal; ++i) {
    auto id = h.Submit(Prompt(100 + i, 9), max_tokens);
    EXPECT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  return ids;
}

TEST(PerItemErrorsTest, RefusedPrefillItemFailsAloneWithItsCode) {
  Harness h("static:3");
  ASSERT_TRUE(h.core->Init().ok());
  std::vector<RequestId> normals = SubmitNormals(h, 20);
  auto bad = h.Submit(Prompt(7, 9), 20);
  ASSERT_TRUE(bad.ok());
  h.verifier.refuse_prefill_ids.insert(*bad);
  h.RunUntilIdle();
  const Collected& c = h.out[*bad];
  EXPECT_EQ(c.final_event.finish_reason, FinishReason::kError);
  EXPECT_EQ(c.final_event.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(c.tokens.empty());
  // No session was created for it, so the router must not release one (it may be another
  // router's session under the same id).
  EXPECT_FALSE(h.verifier.released.count(*bad));
  ExpectNormalsUnaffected(h, normals, 20);
}

TEST(PerItemErrorsTest, RefusedVerifyItemFailsAloneWithItsCode) {
  Harness h("static:3");
  ASSERT_TRUE(h.core->Init().ok());
  std::vector<RequestId> normals = SubmitNormals(h, 24);
  auto bad = h.Submit(Prompt(7, 9), 24);
  ASSERT_TRUE(bad.ok());
  h.core->RunStep();  // prefill + first decode step
  h.verifier.refuse_verify_ids.insert(*bad);
  h.RunUntilIdle();
  const Collected& c = h.out[*bad];
  EXPECT_EQ(c.final_event.finish_reason, FinishReason::kError);
  EXPECT_EQ(c.final_event.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(h.verifier.released.count(*bad));
  ExpectNormalsUnaffected(h, normals, 24);
}

TEST(PerItemErrorsTest, RefusedDraftItemDecodesPlainAndResendsItsHistory) {
  Harness h("static:3");
  ASSERT_TRUE(h.core->Init().ok());
  std::vector<RequestId> normals = SubmitNormals(h, 30);
  auto odd = h.Submit(Prompt(7, 9), 30);
  ASSERT_TRUE(odd.ok());
  h.core->RunStep();
  h.drafters[0]->refuse_ids.insert(*odd);
  for (int i = 0; i < 3; ++i) h.core->RunStep();
  h.drafters[0]->refuse_ids.clear();
  h.RunUntilIdle();
  // Everyone, the refused one included, still produces the target's output.
  EXPECT_EQ(h.out[*odd].tokens, ReferenceGeneration(Prompt(7, 9), 30));
  EXPECT_EQ(h.out[*odd].final_event.finish_reason, FinishReason::kLength);
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty()) << h.drafters[0]->protocol_errors[0];
  ExpectNormalsUnaffected(h, normals, 30);
}

// A malformed draft tree (a cycle, more nodes than asked, a level too deep, a token outside
// the vocabulary, probabilities of the wrong shape, a score outside [0, 1]) costs only that
// request its draft: it decodes plainly that step and still produces the target's output.
TEST(PerItemErrorsTest, MalformedDraftTreeIsDroppedForThatRequestOnly) {
  const std::vector<std::function<void(spec::DraftProposal&)>> spoilers = {
      [](spec::DraftProposal& d) { d.parents.back() = static_cast<int32_t>(d.parents.size()) - 1; },
      [](spec::DraftProposal& d) {
        d.tokens.insert(d.tokens.end(), {1, 2, 3, 4});
        d.parents.insert(d.parents.end(), {-1, -1, -1, -1});
      },
      [](spec::DraftProposal& d) {
        d.tokens.push_back(1);
        d.parents.push_back(static_cast<int32_t>(d.parents.size()) - 1);
      },
      [](spec::DraftProposal& d) { d.tokens[0] = kFakeVocab; },
      [](spec::DraftProposal& d) { d.probs.assign(3, 0.5f); },
      [](spec::DraftProposal& d) { d.scores.assign(d.tokens.size(), 1.5f); },
  };
  for (size_t s = 0; s < spoilers.size(); ++s) {
    Harness h("static:3");
    ASSERT_TRUE(h.core->Init().ok());
    std::vector<RequestId> normals = SubmitNormals(h, 24);
    auto odd = h.Submit(Prompt(7, 9), 24);
    ASSERT_TRUE(odd.ok());
    h.drafters[0]->spoil_drafts[*odd] = spoilers[s];
    h.RunUntilIdle();
    EXPECT_EQ(h.out[*odd].tokens, ReferenceGeneration(Prompt(7, 9), 24)) << "spoiler " << s;
    EXPECT_EQ(h.out[*odd].final_event.finish_reason, FinishReason::kLength) << "spoiler " << s;
    EXPECT_FALSE(h.verifier.saw_draft_ids.count(*odd)) << "spoiler " << s << ": a bad draft reached the verifier";
    EXPECT_TRUE(h.verifier.saw_draft_ids.count(normals[0])) << "spoiler " << s;
    ExpectNormalsUnaffected(h, normals, 24);
  }
}

TEST(ContextLimitTest, PromptThatCannotFitIsInvalidAtSubmission) {
  Harness h("static:3");
  h.verifier.max_context = 48;
  ASSERT_TRUE(h.core->Init().ok());
  auto too_long = h.Submit(Prompt(1, 48), 4);
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  auto fits = h.Submit(Prompt(1, 47), 4);
  EXPECT_TRUE(fits.ok()) << fits.status();
}

// A request asking for more tokens than the context holds ends with kLength exactly where the
// context ends, never with an error; speculation is clamped so no step runs past it; its
// batch-mates are untouched.
TEST(ContextLimitTest, ReachingTheContextEndsTheRequestWithLength) {
  for (const char* policy : {"none", "static:3", "static:8"}) {
    Harness h(policy);
    h.verifier.max_context = 40;
    ASSERT_TRUE(h.core->Init().ok());
    std::vector<RequestId> normals = SubmitNormals(h, 12);
    auto runaway = h.Submit(Prompt(7, 9), 1000);
    ASSERT_TRUE(runaway.ok()) << runaway.status();
    h.RunUntilIdle();
    const Collected& c = h.out[*runaway];
    EXPECT_EQ(c.final_event.finish_reason, FinishReason::kLength) << policy << ": " << c.final_event.status;
    // 9 prompt tokens; the KV holds up to 40, plus the last emitted token: 32 generated.
    EXPECT_EQ(c.tokens, ReferenceGeneration(Prompt(7, 9), 32)) << policy;
    EXPECT_EQ(h.verifier.out_of_range_items, 0) << policy;
    ExpectNormalsUnaffected(h, normals, 12);
  }
}

}  // namespace
}  // namespace splitspec::router::testing
