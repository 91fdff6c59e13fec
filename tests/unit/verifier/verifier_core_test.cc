// VerifierCore without gRPC: prefill and batched verification reproduce plain greedy decoding
// whatever the drafts are, the accepted path is committed to KV (and the rest freed), and bad
// input is refused without touching any session.
#include "verifier/verifier_core.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "tests/unit/verifier/draft_chain.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec::verifier {
namespace {

using splitspec::testing::GetTestModels;
using splitspec::testing::GreedyReference;

std::unique_ptr<VerifierCore> MakeCore(int32_t max_draft_tokens = 8, int32_t max_context = 0,
                                       VerifierOptions options = {}) {
  options.max_context_tokens = max_context;
  options.model_dir = GetTestModels().target_dir;
  options.kv_blocks = 64;
  options.block_size = 16;
  options.max_draft_tokens = max_draft_tokens;
  auto core = VerifierCore::Create(options);
  EXPECT_TRUE(core.ok()) << core.status();
  return core.ok() ? std::move(*core) : nullptr;
}

using testing::Chain;

const std::vector<int32_t> kPromptA = {1, 17, 42, 99, 5, 300};
const std::vector<int32_t> kPromptB = {1, 250, 251, 252};
const std::vector<int32_t> kPromptC = {1, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 3};

TEST(VerifierCoreTest, PlainDecodeBatchMatchesGreedyReference) {
  auto core = MakeCore();
  ASSERT_NE(core, nullptr);
  const int kSteps = 12;
  const std::vector<std::vector<int32_t>> prompts = {kPromptA, kPromptB, kPromptC};
  std::vector<spec::PrefillItem> items;
  for (size_t i = 0; i < prompts.size(); ++i) items.push_back({i + 1, prompts[i], {}});
  auto prefilled = core->Prefill(items);
  ASSERT_TRUE(prefilled.ok()) << prefilled.status();
  std::vector<std::vector<int32_t>> outputs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) outputs[i].push_back((*prefilled)[i].next_token);
  for (int step = 1; step < kSteps; ++step) {
    std::vector<spec::VerifyItem> batch;
    for (size_t i = 0; i < prompts.size(); ++i) batch.push_back({i + 1, {}});
    auto verified = core->Verify(batch);
    ASSERT_TRUE(verified.ok()) << verified.status();
    ASSERT_EQ(verified->results.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(verified->results[i].id, i + 1);
      ASSERT_EQ(verified->results[i].tokens.size(), 1u);
      EXPECT_EQ(verified->results[i].accept_length, 0);
      outputs[i].push_back(verified->results[i].tokens[0]);
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(outputs[i], GreedyReference(GetTestModels().target_dir, prompts[i], kSteps)) << "prompt " << i;
    // KV holds the prompt and every generated token but the pending one.
    EXPECT_EQ(core->KvLength(i + 1), static_cast<int32_t>(prompts[i].size()) + kSteps - 1);
  }
}

// Parameter: the KV cache's dtype (the reference decodes with the same).
class VerifierDraftsTest : public ::testing::TestWithParam<engine::DType> {};

TEST_P(VerifierDraftsTest, DraftsAreAcceptedUpToTheFirstMismatchAndOutputStaysGreedy) {
  VerifierOptions options;
  options.kv_dtype = GetParam();
  auto core = MakeCore(8, 0, options);
  ASSERT_NE(core, nullptr);
  const int kTotal = 24;
  const std::vector<int32_t> reference = GreedyReference(GetTestModels().target_dir, kPromptA, kTotal, GetParam());
  const std::vector<int32_t> reference_b = GreedyReference(GetTestModels().target_dir, kPromptB, kTotal, GetParam());
  auto prefilled = core->Prefill({{1, kPromptA, {}}, {2, kPromptB, {}}});
  ASSERT_TRUE(prefilled.ok()) << prefilled.status();
  std::vector<int32_t> out = {(*prefilled)[0].next_token};
  std::vector<int32_t> out_b = {(*prefilled)[1].next_token};
  // Request 1 gets drafts that follow the reference for `good` tokens and then go wrong;
  // request 2 decodes plainly in the same batch.
  const int kGood[] = {3, 0, 2, 4, 1};
  for (int good : kGood) {
    if (out.size() + 6 > reference.size()) break;
    std::vector<int32_t> draft(reference.begin() + out.size(), reference.begin() + out.size() + good);
    const int32_t wrong = (reference[out.size() + good] + 1) % 512;
    draft.push_back(wrong);
    const size_t committed_before = kPromptA.size() + out.size();
    auto verified = core->Verify({{1, Chain(draft)}, {2, {}}});
    ASSERT_TRUE(verified.ok()) << verified.status();
    const spec::VerifyResult& result = verified->results[0];
    EXPECT_EQ(result.accept_length, good);
    ASSERT_EQ(result.tokens.size(), static_cast<size_t>(good) + 1);
    out.insert(out.end(), result.tokens.begin(), result.tokens.end());
    out_b.insert(out_b.end(), verified->results[1].tokens.begin(), verified->results[1].tokens.end());
    // The accepted path (pending token + accepted drafts) is committed; the rest is gone.
    EXPECT_EQ(core->KvLength(1), static_cast<int32_t>(committed_before) + good);
  }
  // A fully correct chain: everything accepted plus the bonus token.
  std::vector<int32_t> draft(reference.begin() + out.size(), reference.begin() + out.size() + 4);
  auto verified = core->Verify({{1, Chain(draft)}});
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->results[0].accept_length, 4);
  out.insert(out.end(), verified->results[0].tokens.begin(), verified->results[0].tokens.end());

  ASSERT_LE(out.size(), reference.size());
  EXPECT_EQ(out, std::vector<int32_t>(reference.begin(), reference.begin() + out.size()));
  EXPECT_EQ(out_b, std::vector<int32_t>(reference_b.begin(), reference_b.begin() + out_b.size()));
  EXPECT_GT(verified->compute_seconds, 0.0);
}

INSTANTIATE_TEST_SUITE_P(KvDTypes, VerifierDraftsTest, ::testing::Values(engine::DType::kF32, engine::DType::kF16));

TEST(VerifierCoreTest, TreeAcceptsTheMatchingBranch) {
  auto core = MakeCore();
  ASSERT_NE(core, nullptr);
  const std::vector<int32_t> reference = GreedyReference(GetTestModels().target_dir, kPromptC, 8);
  auto prefilled = core->Prefill({{5, kPromptC, {}}});
  ASSERT_TRUE(prefilled.ok()) << prefilled.status();
  ASSERT_EQ((*prefilled)[0].next_token, reference[0]);
  // Root children: a wrong token (node 0) and the right one (node 1); node 2 hangs off the
  // wrong branch, node 3 (right) and node 4 (wrong) off the right one.
  const int32_t r1 = reference[1], r2 = reference[2];
  spec::DraftProposal tree;
  tree.tokens = {(r1 + 1) % 512, r1, r2, r2, (r2 + 3) % 512};
  tree.parents = {-1, -1, 0, 1, 1};
  auto verified = core->Verify({{5, tree}});
  ASSERT_TRUE(verified.ok()) << verified.status();
  EXPECT_EQ(verified->results[0].accept_length, 2);
  EXPECT_EQ(verified->results[0].tokens, std::vector<int32_t>({r1, r2, reference[3]}));
  EXPECT_EQ(core->KvLength(5), static_cast<int32_t>(kPromptC.size()) + 3);
  // The next plain step continues the reference, so the committed KV is the right path's.
  auto next = core->Verify({{5, {}}});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->results[0].tokens, std::vector<int32_t>({reference[4]}));
}

TEST(VerifierCoreTest, ReleaseFreesBlocksAndForgetsTheSession) {
  auto core = MakeCore();
  ASSERT_NE(core, nullptr);
  const spec::WorkerInfo before = core->Info();
  EXPECT_EQ(before.live_sessions, 0);
  EXPECT_EQ(before.free_blocks, before.total_blocks);
  ASSERT_TRUE(core->Prefill({{1, kPromptA, {}}, {2, kPromptC, {}}}).ok());
  const spec::WorkerInfo during = core->Info();
  EXPECT_EQ(during.live_sessions, 2);
  EXPECT_LT(during.free_blocks, during.total_blocks);
  EXPECT_EQ(core->Release({1, 2, 99}), 2);
  const spec::WorkerInfo after = core->Info();
  EXPECT_EQ(after.live_sessions, 0);
  EXPECT_EQ(after.free_blocks, after.total_blocks);
  EXPECT_EQ(core->KvLength(1), -1);
}

class VerifierBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core_ = MakeCore(/*max_draft_tokens=*/4);
    ASSERT_NE(core_, nullptr);
    ASSERT_TRUE(core_->Prefill({{1, kPromptA, {}}}).ok());
    length_ = core_->KvLength(1);
  }
  // Every bad batch below also carries a valid item for request 1: the bad item gets its own
  // status and leaves its session alone; request 1 still advances.
  void ExpectRefused(const spec::VerifyItem& bad, absl::StatusCode code, const std::string& fragment) {
    const int32_t bad_length = core_->KvLength(bad.id);
    auto result = core_->Verify({{1, Chain({3, 4})}, bad});
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->results.size(), 2u);
    const spec::VerifyResult& good = result->results[0];
    const spec::VerifyResult& refused = result->results[1];
    EXPECT_TRUE(good.status.ok()) << good.status;
    EXPECT_FALSE(good.tokens.empty());
    EXPECT_EQ(core_->KvLength(1), length_ + static_cast<int32_t>(good.tokens.size()));
    EXPECT_EQ(refused.id, bad.id);
    EXPECT_EQ(refused.status.code(), code) << refused.status;
    EXPECT_NE(refused.status.message().find(fragment), std::string::npos) << refused.status;
    EXPECT_TRUE(refused.tokens.empty());
    if (bad.id != 1) {
      EXPECT_EQ(core_->KvLength(bad.id), bad_length);
    }
  }
  std::unique_ptr<VerifierCore> core_;
  int32_t length_ = 0;
};

TEST_F(VerifierBadInputTest, UnknownSession) {
  ExpectRefused({77, {}}, absl::StatusCode::kInvalidArgument, "unknown session");
}

TEST_F(VerifierBadInputTest, TokenOutOfVocab) {
  ASSERT_TRUE(core_->Prefill({{2, kPromptB, {}}}).ok());
  ExpectRefused({2, Chain({5, 512})}, absl::StatusCode::kInvalidArgument, "vocab");
}

TEST_F(VerifierBadInputTest, MalformedTree) {
  ASSERT_TRUE(core_->Prefill({{2, kPromptB, {}}}).ok());
  spec::DraftProposal draft;
  draft.tokens = {5, 6};
  draft.parents = {-1, 1};  // a node cannot be its own parent
  ExpectRefused({2, draft}, absl::StatusCode::kInvalidArgument, "malformed draft tree");
}

TEST_F(VerifierBadInputTest, TooManyDraftTokens) {
  ASSERT_TRUE(core_->Prefill({{2, kPromptB, {}}}).ok());
  ExpectRefused({2, Chain({5, 6, 7, 8, 9})}, absl::StatusCode::kInvalidArgument, "at most 4");
}

TEST_F(VerifierBadInputTest, DuplicateRequestInBatch) {
  ExpectRefused({1, {}}, absl::StatusCode::kInvalidArgument, "twice");
}

TEST_F(VerifierBadInputTest, NegativeDraftProbability) {
  ASSERT_TRUE(core_->Prefill({{2, kPromptB, {0.8f, 0, 1.0f, 3}}}).ok());
  spec::DraftProposal draft = Chain({5});
  draft.probs.assign(core_->vocab_size(), 0.0f);
  draft.probs[5] = 1.5f;
  draft.probs[6] = -0.5f;
  ExpectRefused({2, draft}, absl::StatusCode::kInvalidArgument, ">= 0");
}

TEST_F(VerifierBadInputTest, NanDraftProbability) {
  ASSERT_TRUE(core_->Prefill({{2, kPromptB, {0.8f, 0, 1.0f, 3}}}).ok());
  spec::DraftProposal draft = Chain({5});
  draft.probs.assign(core_->vocab_size(), 0.0f);
  draft.probs[5] = 1.0f;
  draft.probs[7] = std::nanf("");
  ExpectRefused({2, draft}, absl::StatusCode::kInvalidArgument, ">= 0");
}

TEST_F(VerifierBadInputTest, PrefillRefusesBadItemsAlone) {
  auto mixed = core_->Prefill({{3, kPromptB, {}}, {4, {1, -5}, {}}, {5, {}, {}}, {1, kPromptB, {}}, {3, kPromptA, {}}});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  ASSERT_EQ(mixed->size(), 5u);
  EXPECT_TRUE((*mixed)[0].status.ok()) << (*mixed)[0].status;
  EXPECT_EQ((*mixed)[0].next_token, GreedyReference(GetTestModels().target_dir, kPromptB, 1)[0]);
  EXPECT_EQ((*mixed)[1].status.code(), absl::StatusCode::kInvalidArgument);  // out of vocab
  EXPECT_EQ((*mixed)[2].status.code(), absl::StatusCode::kInvalidArgument);  // empty
  EXPECT_EQ((*mixed)[3].status.code(), absl::StatusCode::kAlreadyExists);    // live session
  EXPECT_EQ((*mixed)[4].status.code(), absl::StatusCode::kInvalidArgument);  // twice in the batch
  EXPECT_EQ(core_->Info().live_sessions, 2);  // 1 (from SetUp) and 3
  EXPECT_EQ(core_->KvLength(3), static_cast<int32_t>(kPromptB.size()));
  EXPECT_EQ(core_->KvLength(4), -1);
  EXPECT_EQ(core_->KvLength(1), length_);
}

TEST(VerifierContextTest, PromptThatFillsTheContextIsRefusedAlone) {
  auto core = MakeCore(/*max_draft_tokens=*/4, /*max_context=*/32);
  ASSERT_NE(core, nullptr);
  EXPECT_EQ(core->Info().max_context_tokens, 32);
  const std::vector<int32_t> too_long(32, 7);
  auto mixed = core->Prefill({{1, too_long, {}}, {2, kPromptA, {}}});
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ((*mixed)[0].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*mixed)[1].status.ok());
  EXPECT_EQ(core->KvLength(1), -1);
}

TEST(VerifierContextTest, StepPastTheContextIsOutOfRangeForThatItemOnly) {
  auto core = MakeCore(/*max_draft_tokens=*/4, /*max_context=*/32);
  ASSERT_NE(core, nullptr);
  const std::vector<int32_t> near_end = {1, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9,
                                         9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9};  // 30 tokens
  ASSERT_TRUE(core->Prefill({{1, near_end, {}}, {2, kPromptA, {}}}).ok());
  // KV 30 + pending 1 + 2 draft nodes = 33 > 32; request 2 proceeds.
  auto step = core->Verify({{1, Chain({3, 4})}, {2, Chain({3, 4})}});
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->results[0].status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(step->results[1].status.ok());
  EXPECT_EQ(core->KvLength(1), 30);
  // Plain decode still fits (30 + 1 = 31), and then one more (31 + 1 = 32), then nothing.
  for (int32_t want : {31, 32}) {
    auto plain = core->Verify({{1, {}}});
    ASSERT_TRUE(plain.ok());
    EXPECT_TRUE(plain->results[0].status.ok()) << plain->results[0].status;
    EXPECT_EQ(core->KvLength(1), want);
  }
  auto full = core->Verify({{1, {}}});
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->results[0].status.code(), absl::StatusCode::kOutOfRange);
}

TEST(VerifierSamplingTest, DegenerateTemperatureNeverYieldsAnInvalidToken) {
  auto core = MakeCore();
  ASSERT_NE(core, nullptr);
  const std::vector<int32_t> reference = GreedyReference(GetTestModels().target_dir, kPromptA, 6);
  for (float t : {1e-20f, 1e-30f, 1e-38f, 1e-45f}) {
    const spec::RequestId id = 100;
    auto prefilled = core->Prefill({{id, kPromptA, {t, 0, 1.0f, 5}}});
    ASSERT_TRUE(prefilled.ok()) << prefilled.status();
    ASSERT_TRUE((*prefilled)[0].status.ok()) << "T=" << t << ": " << (*prefilled)[0].status;
    std::vector<int32_t> out = {(*prefilled)[0].next_token};
    for (int step = 1; step < 6; ++step) {
      auto verified = core->Verify({{id, {}}});
      ASSERT_TRUE(verified.ok()) << verified.status();
      ASSERT_TRUE(verified->results[0].status.ok()) << verified->results[0].status;
      out.push_back(verified->results[0].tokens.back());
    }
    // A temperature this close to 0 is greedy in effect.
    EXPECT_EQ(out, reference) << "T=" << t;
    core->Release({id});
  }
}

TEST(VerifierLeaseTest, IdleSessionsAreReclaimedAndTheirKvFreed) {
  double now = 50.0;
  VerifierOptions options;
  options.session_lease_seconds = 3.0;
  options.now = [&now] { return now; };
  auto core = MakeCore(8, 0, options);
  ASSERT_NE(core, nullptr);
  const int32_t free_before = core->Info().free_blocks;
  ASSERT_TRUE(core->Prefill({{1, kPromptA, {}}, {2, kPromptB, {}}}).ok());
  now += 2.0;
  ASSERT_TRUE(core->Verify({{2, {}}}).ok());  // renews 2
  now += 2.0;
  EXPECT_EQ(core->ReclaimIdle(), 1);
  EXPECT_EQ(core->KvLength(1), -1);
  EXPECT_GE(core->KvLength(2), 0);
  now += 3.5;
  EXPECT_EQ(core->ReclaimIdle(), 1);
  EXPECT_EQ(core->Info().live_sessions, 0);
  EXPECT_EQ(core->Info().free_blocks, free_before);
}

TEST(VerifierLeaseTest, SessionCapRefusesTheItemsBeyondIt) {
  VerifierOptions options;
  options.max_sessions = 2;
  auto core = MakeCore(8, 0, options);
  ASSERT_NE(core, nullptr);
  auto first = core->Prefill({{1, kPromptA, {}}, {2, kPromptB, {}}, {3, kPromptC, {}}});
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE((*first)[0].status.ok());
  EXPECT_TRUE((*first)[1].status.ok());
  EXPECT_EQ((*first)[2].status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(core->KvLength(3), -1);
  core->Release({1});
  auto again = core->Prefill({{3, kPromptC, {}}});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)[0].status.ok());
}

}  // namespace
}  // namespace splitspec::verifier
