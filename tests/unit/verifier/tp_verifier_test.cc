// VerifierCore with tensor parallelism on the CPU (ranks as threads, in-process communicator):
// a whole session script (prefills, chain and tree drafts with rejections, a sampled request,
// releases) gives the same tokens and accept lengths with TP = 2 as with TP = 1; the follower's
// KV bookkeeping equals rank 0's after every step; and requests rank 0 refuses, before or after
// the step began, never leave the follower hung or out of step.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/unit/verifier/draft_chain.h"
#include "tests/unit/verifier/test_models.h"
#include "tests/unit/verifier/tp_test_util.h"
#include "verifier/verifier_core.h"

namespace splitspec::verifier {
namespace {

using splitspec::testing::GetTestModels;
using splitspec::testing::GreedyReference;
using testing::ExpectLockstep;
using testing::RunWithDeadline;
using testing::StepRecorder;

constexpr int kVocab = 512;

VerifierOptions Options(int tp_size, StepRecorder* recorder, int32_t kv_blocks = 64) {
  VerifierOptions options;
  options.model_dir = GetTestModels().target_dir;
  options.kv_blocks = kv_blocks;
  options.block_size = 16;
  options.max_draft_tokens = 16;
  options.n_threads = 1;
  options.tp_size = tp_size;
  if (recorder != nullptr) options.step_observer = recorder->Observer();
  return options;
}

using testing::Chain;

// Everything a client sees from a session script, in order.
struct Transcript {
  std::vector<std::string> lines;
  std::vector<int32_t> greedy_a;  // request 1's tokens
  int accepted = 0;               // draft tokens accepted, all requests
  int rejected_steps = 0;         // verify results that accepted fewer drafts than sent
  void Add(const spec::VerifyResponse& response, const std::vector<spec::VerifyItem>& items) {
    for (size_t i = 0; i < response.results.size(); ++i) {
      const spec::VerifyResult& r = response.results[i];
      lines.push_back(absl::StrCat("verify ", r.id, " accept ", r.accept_length, " tokens ",
                                   absl::StrJoin(r.tokens, ",")));
      accepted += r.accept_length;
      if (r.accept_length < static_cast<int32_t>(items[i].draft.tokens.size())) ++rejected_steps;
      if (r.id == 1) greedy_a.insert(greedy_a.end(), r.tokens.begin(), r.tokens.end());
    }
  }
};

const std::vector<int32_t> kTpPromptA = {1, 17, 42, 99, 5, 300};
const std::vector<int32_t> kTpPromptB = {1, 7, 7, 7, 7, 7, 7, 7, 7, 3};
const std::vector<int32_t> kTpPromptC = {1, 250, 251, 252};
const std::vector<int32_t> kTpPromptD = {1, 400, 3, 99};

// Request 1 (greedy): chains following the greedy reference for `good` tokens, then a wrong
// one. Request 2 (greedy): trees with a wrong and a right branch. Request 3 (sampled): chains of
// arbitrary tokens, accepted or not by rejection sampling. Request 4 joins after 2 leaves.
Transcript RunScript(VerifierCore& core) {
  Transcript t;
  const std::vector<int32_t> ref_a = GreedyReference(GetTestModels().target_dir, kTpPromptA, 40);
  const std::vector<int32_t> ref_b = GreedyReference(GetTestModels().target_dir, kTpPromptB, 40);
  spec::PrefillItem sampled{3, kTpPromptC, {}};
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.seed = 1234;
  auto prefilled = core.Prefill({{1, kTpPromptA, {}}, {2, kTpPromptB, {}}, sampled});
  EXPECT_TRUE(prefilled.ok()) << prefilled.status();
  if (!prefilled.ok()) return t;
  for (const spec::PrefillResult& r : *prefilled)
    t.lines.push_back(absl::StrCat("prefill ", r.id, " -> ", r.next_token));
  t.greedy_a.push_back((*prefilled)[0].next_token);
  std::vector<int32_t> out_b = {(*prefilled)[1].next_token};

  const int kGood[] = {3, 0, 2, 5, 1, 4};
  for (int step = 0; step < 6; ++step) {
    std::vector<spec::VerifyItem> items;
    // Request 1: the next `good` reference tokens, then a wrong one.
    const size_t at = t.greedy_a.size();
    std::vector<int32_t> draft(ref_a.begin() + at, ref_a.begin() + at + kGood[step]);
    draft.push_back((ref_a[at + kGood[step]] + 1) % kVocab);
    items.push_back({1, Chain(draft)});
    if (step < 3) {
      // Request 2: root children wrong (node 0) and right (node 1); node 2 (right) under node 1.
      const size_t b = out_b.size();
      spec::DraftProposal tree;
      tree.tokens = {(ref_b[b] + 5) % kVocab, ref_b[b], ref_b[b + 1]};
      tree.parents = {-1, -1, 1};
      items.push_back({2, tree});
    }
    items.push_back({3, Chain({static_cast<int32_t>(17 + step), 42, 99})});
    if (step >= 4) items.push_back({4, {}});
    auto verified = core.Verify(items);
    EXPECT_TRUE(verified.ok()) << verified.status();
    if (!verified.ok()) return t;
    t.Add(*verified, items);
    for (const spec::VerifyResult& r : verified->results) {
      if (r.id == 2) out_b.insert(out_b.end(), r.tokens.begin(), r.tokens.end());
    }
    if (step == 2) {
      t.lines.push_back(absl::StrCat("release ", core.Release({2})));
      auto joined = core.Prefill({{4, kTpPromptD, {}}});
      EXPECT_TRUE(joined.ok()) << joined.status();
      if (!joined.ok()) return t;
      t.lines.push_back(absl::StrCat("prefill 4 -> ", (*joined)[0].next_token));
    }
  }
  // Request 1's output is the greedy reference whatever the drafts were.
  EXPECT_EQ(t.greedy_a, std::vector<int32_t>(ref_a.begin(), ref_a.begin() + t.greedy_a.size()));
  EXPECT_EQ(out_b, std::vector<int32_t>(ref_b.begin(), ref_b.begin() + out_b.size()));
  t.lines.push_back(absl::StrCat("release ", core.Release({1, 3, 4, 99})));
  return t;
}

TEST(TpVerifierTest, TwoRanksGiveTheSameTranscriptAsOneAndStayInLockstep) {
  Transcript one, two;
  StepRecorder recorder_one, recorder_two;
  RunWithDeadline([&] {
    auto core = VerifierCore::Create(Options(1, &recorder_one));
    ASSERT_TRUE(core.ok()) << core.status();
    EXPECT_EQ((*core)->tp_size(), 1);
    one = RunScript(**core);
  });
  RunWithDeadline([&] {
    auto core = VerifierCore::Create(Options(2, &recorder_two));
    ASSERT_TRUE(core.ok()) << core.status();
    EXPECT_EQ((*core)->tp_size(), 2);
    two = RunScript(**core);
    EXPECT_EQ((*core)->Info().live_sessions, 0);
    EXPECT_EQ((*core)->Info().free_blocks, (*core)->Info().total_blocks);
  });  // the core's destructor shut the follower down and joined it

  // The script exercised what it claims: accepted drafts, rejections, and every request.
  EXPECT_GT(one.accepted, 10);
  EXPECT_GT(one.rejected_steps, 6);
  ASSERT_EQ(two.lines.size(), one.lines.size());
  for (size_t i = 0; i < one.lines.size(); ++i)
    EXPECT_EQ(two.lines[i], one.lines[i]) << "line " << i;

  ExpectLockstep(recorder_two, 2);
  // TP = 2 rank 0 applied exactly the KV operations TP = 1 did.
  const std::vector<StepRecord> a = recorder_one.Rank(0), b = recorder_two.Rank(0);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].kv == b[i].kv) << "step " << i;
}

// Bad requests on rank 0: refused before the step (no broadcast at all) or after it began (the
// forward finds the KV cache full on every rank: rank 0 aborts the step everywhere). The
// follower must end up exactly where rank 0 is, and later steps and the shutdown still work.
TEST(TpVerifierTest, RefusedRequestsNeverLeaveTheFollowerHungOrOutOfStep) {
  StepRecorder recorder;
  RunWithDeadline([&] {
    // 4 blocks of 16 tokens.
    auto created = VerifierCore::Create(Options(2, &recorder, /*kv_blocks=*/4));
    ASSERT_TRUE(created.ok()) << created.status();
    VerifierCore& core = **created;
    const std::vector<int32_t> prompt20(20, 9), prompt40(40, 9), prompt17(17, 8);

    ASSERT_TRUE(core.Prefill({{1, prompt20, {}}}).ok());  // 2 blocks
    // Refused during the step: 3 more blocks needed, 2 free.
    auto full = core.Prefill({{2, prompt40, {}}});
    EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
    EXPECT_EQ(core.KvLength(2), -1);
    EXPECT_EQ(core.Info().live_sessions, 1);
    ASSERT_TRUE(core.Prefill({{2, prompt17, {}}}).ok());  // the last 2 blocks
    EXPECT_EQ(core.Info().free_blocks, 0);
    // Items refused before the step (each with its own status): a batch of only refused
    // items reaches nothing on the follower.
    auto unknown = core.Verify({{77, {}}});
    ASSERT_TRUE(unknown.ok()) << unknown.status();
    EXPECT_EQ(unknown->results[0].status.code(), absl::StatusCode::kInvalidArgument);
    auto out_of_vocab = core.Verify({{1, Chain({1, kVocab})}});
    ASSERT_TRUE(out_of_vocab.ok()) << out_of_vocab.status();
    EXPECT_EQ(out_of_vocab->results[0].status.code(), absl::StatusCode::kInvalidArgument);
    auto existing = core.Prefill({{1, prompt17, {}}});
    ASSERT_TRUE(existing.ok()) << existing.status();
    EXPECT_EQ((*existing)[0].status.code(), absl::StatusCode::kAlreadyExists);
    // Refused during the step: request 1 holds 20 tokens in 32 slots; 15 more nodes need a block.
    auto overflow = core.Verify({{2, {}}, {1, Chain(std::vector<int32_t>(14, 3))}});
    EXPECT_EQ(overflow.status().code(), absl::StatusCode::kResourceExhausted) << overflow.status();
    EXPECT_EQ(core.KvLength(1), 20);
    EXPECT_EQ(core.KvLength(2), 17);
    // The group still works.
    auto next = core.Verify({{1, Chain({3, 4})}, {2, {}}});
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ(core.Release({1}), 1);
    ASSERT_TRUE(core.Verify({{2, Chain({5})}}).ok());
  });

  ExpectLockstep(recorder, 2);
  const std::vector<StepRecord> steps = recorder.Rank(1);
  // prefill, prefill (aborted), prefill, verify (aborted), verify, release, verify.
  ASSERT_EQ(steps.size(), 7u);
  const StepKind kinds[] = {StepKind::kPrefill, StepKind::kPrefill, StepKind::kPrefill,
                            StepKind::kVerify,  StepKind::kVerify,  StepKind::kRelease,
                            StepKind::kVerify};
  const bool aborted[] = {false, true, false, true, false, false, false};
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].kind, kinds[i]) << i;
    EXPECT_EQ(steps[i].aborted, aborted[i]) << i;
  }
  EXPECT_EQ(steps[3].kv.lengths.at(1), 20) << "the aborted verify was undone on the follower";
}

TEST(TpVerifierTest, CreateRefusesWhatItCannotRun) {
  RunWithDeadline([] {
    VerifierOptions options = Options(3, nullptr);  // 4 heads, 2 KV heads: not 3 ways
    EXPECT_FALSE(VerifierCore::Create(options).ok());
    options.tp_size = 0;
    EXPECT_EQ(VerifierCore::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
    options.tp_size = 2;
    options.device = "bogus";
    EXPECT_EQ(VerifierCore::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
    options.tp_size = 1;
    options.device = "cuda:0";
    const absl::Status cuda = VerifierCore::Create(options).status();
    if (!engine::CudaBackendCompiled()) {
      EXPECT_EQ(cuda.code(), absl::StatusCode::kUnimplemented) << cuda;
      EXPECT_NE(cuda.message().find("--device cpu"), std::string::npos) << cuda;
    } else if (!cuda.ok()) {
      EXPECT_EQ(cuda.code(), absl::StatusCode::kUnavailable) << cuda;
    }
  });
}

}  // namespace
}  // namespace splitspec::verifier
