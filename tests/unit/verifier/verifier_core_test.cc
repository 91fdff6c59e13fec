// VerifierCore without gRPC: prefill and batched verification reproduce plain greedy decoding
// whatever the drafts are, the accepted path is committed to KV (and the rest freed), and bad
// input is refused without touching any session.
#include "verifier/verifier_core.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tests/unit/verifier/test_models.h"

namespace splitspec::verifier {
namespace {

using splitspec::testing::GetTestModels;
using splitspec::testing::GreedyReference;

std::unique_ptr<VerifierCore> MakeCore(int32_t max_draft_tokens = 8) {
  VerifierOptions options;
  options.model_dir = GetTestModels().target_dir;
  options.kv_blocks = 64;
  options.block_size = 16;
  options.max_draft_tokens = max_draft_tokens;
  auto core = VerifierCore::Create(options);
  EXPECT_TRUE(core.ok()) << core.status();
  return core.ok() ? std::move(*core) : nullptr;
}

spec::DraftProposal Chain(const std::vector<int32_t>& tokens) {
  spec::DraftProposal draft;
  draft.tokens = tokens;
  for (size_t i = 0; i < tokens.size(); ++i) draft.parents.push_back(static_cast<int32_t>(i) - 1);
  return draft;
}

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

TEST(VerifierCoreTest, DraftsAreAcceptedUpToTheFirstMismatchAndOutputStaysGreedy) {
  auto core = MakeCore();
  ASSERT_NE(core, nullptr);
  const int kTotal = 24;
  const std::vector<int32_t> reference = GreedyReference(GetTestModels().target_dir, kPromptA, kTotal);
  const std::vector<int32_t> reference_b = GreedyReference(GetTestModels().target_dir, kPromptB, kTotal);
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
  // Every bad batch below also carries a valid item for request 1: it must stay untouched.
  void ExpectRefused(const spec::VerifyItem& bad, absl::StatusCode code, const std::string& fragment) {
    auto result = core_->Verify({{1, Chain({3, 4})}, bad});
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), code) << result.status();
    EXPECT_NE(result.status().message().find(fragment), std::string::npos) << result.status();
    EXPECT_EQ(core_->KvLength(1), length_);
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

TEST_F(VerifierBadInputTest, PrefillRefusesBadPromptsAtomically) {
  auto out_of_vocab = core_->Prefill({{3, kPromptB, {}}, {4, {1, -5}, {}}});
  EXPECT_EQ(out_of_vocab.status().code(), absl::StatusCode::kInvalidArgument);
  auto empty = core_->Prefill({{3, {}, {}}});
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  auto existing = core_->Prefill({{1, kPromptB, {}}});
  EXPECT_EQ(existing.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(core_->Info().live_sessions, 1);  // request 3 was not created by the failed batch
  EXPECT_EQ(core_->KvLength(3), -1);
}

}  // namespace
}  // namespace splitspec::verifier
