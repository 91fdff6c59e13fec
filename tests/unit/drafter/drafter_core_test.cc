// DrafterCore without gRPC: the known_length/new_tokens protocol keeps sessions in sync, the
// draft model's KV rolls back its rejected tail and catches up (also after steps where it
// proposed nothing), proposals are batched per step, and bad input changes nothing.
#include "drafter/drafter_core.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "drafter/draft_model_proposer.h"
#include "drafter/ngram_proposer.h"
#include "tests/unit/drafter/propose_items.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec::drafter {
namespace {

using splitspec::testing::GetTestModels;
using testing::Concat;
using testing::Item;
using splitspec::testing::GreedyReference;

constexpr int32_t kMaxDraft = 6;

struct Fixture {
  std::unique_ptr<DrafterCore> core;
  DraftModelProposer* proposer = nullptr;  // owned by core
};

Fixture MakeDraftModelCore(DrafterOptions core_options = {}) {
  DraftModelOptions options;
  options.model_dir = GetTestModels().draft_dir;
  options.kv_blocks = 64;
  auto proposer = DraftModelProposer::Create(options);
  EXPECT_TRUE(proposer.ok()) << proposer.status();
  Fixture f;
  if (!proposer.ok()) return f;
  f.proposer = proposer->get();
  core_options.max_draft_tokens = kMaxDraft;
  f.core = std::make_unique<DrafterCore>(std::move(*proposer), core_options);
  return f;
}

// What the draft model should propose after `history`: its own greedy continuation.
std::vector<int32_t> Expected(const std::vector<int32_t>& history, int k) {
  return GreedyReference(GetTestModels().draft_dir, history, k);
}

const std::vector<int32_t> kPrompt = {1, 17, 42, 99, 5, 300, 12};

TEST(DrafterCoreTest, FirstProposalIsTheDraftModelsGreedyChain) {
  Fixture f = MakeDraftModelCore();
  ASSERT_NE(f.core, nullptr);
  auto response = f.core->Propose({Item(1, 0, kPrompt, 4)});
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->results.size(), 1u);
  const spec::DraftProposal& draft = response->results[0].draft;
  EXPECT_EQ(draft.tokens, Expected(kPrompt, 4));
  EXPECT_EQ(draft.parents, std::vector<int32_t>({-1, 0, 1, 2}));
  EXPECT_TRUE(draft.probs.empty());
  // KV: the whole history plus the first k - 1 draft tokens (the last one was never fed).
  EXPECT_EQ(f.proposer->KvLength(1), static_cast<int32_t>(kPrompt.size()) + 3);
}

TEST(DrafterCoreTest, RollsBackTheRejectedTailAndCatchesUp) {
  Fixture f = MakeDraftModelCore();
  ASSERT_NE(f.core, nullptr);
  auto first = f.core->Propose({Item(1, 0, kPrompt, 5)});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::vector<int32_t> draft = first->results[0].draft.tokens;
  ASSERT_EQ(draft.size(), 5u);
  // The verifier accepted two draft tokens and emitted a token of its own that differs from
  // the third draft token.
  const std::vector<int32_t> committed = {draft[0], draft[1], (draft[2] + 1) % 512};
  std::vector<int32_t> history = Concat(kPrompt, committed);
  auto second = f.core->Propose({Item(1, static_cast<int32_t>(kPrompt.size()), committed, 3)});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->results[0].draft.tokens, Expected(history, 3));
  ASSERT_NE(f.core->History(1), nullptr);
  EXPECT_EQ(*f.core->History(1), history);
  // The draft KV now holds the new history plus two speculated tokens, and agrees with it.
  const std::vector<int32_t>* held = f.proposer->KvTokens(1);
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->size(), history.size() + 2);
  EXPECT_EQ(std::vector<int32_t>(held->begin(), held->begin() + history.size()), history);
  EXPECT_EQ(f.proposer->KvLength(1), static_cast<int32_t>(held->size()));
}

TEST(DrafterCoreTest, CatchesUpAfterStepsWithoutProposals) {
  Fixture f = MakeDraftModelCore();
  ASSERT_NE(f.core, nullptr);
  ASSERT_TRUE(f.core->Propose({Item(1, 0, kPrompt, 3)}).ok());
  std::vector<int32_t> history = kPrompt;
  // Three steps with k = 0 (plain decodes on the verifier): tokens arrive, nothing proposed.
  for (int32_t token : {33, 44, 55}) {
    auto response = f.core->Propose({Item(1, static_cast<int32_t>(history.size()), {token}, 0)});
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_TRUE(response->results[0].draft.tokens.empty());
    history.push_back(token);
  }
  auto response = f.core->Propose({Item(1, static_cast<int32_t>(history.size()), {66, 77}, 4)});
  ASSERT_TRUE(response.ok()) << response.status();
  history.push_back(66);
  history.push_back(77);
  EXPECT_EQ(response->results[0].draft.tokens, Expected(history, 4));
}

TEST(DrafterCoreTest, BatchOfRequestsWithDifferentDepths) {
  Fixture f = MakeDraftModelCore();
  ASSERT_NE(f.core, nullptr);
  const std::vector<std::vector<int32_t>> prompts = {kPrompt, {1, 200, 201}, {1, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}};
  const int32_t depths[] = {2, 0, 5};
  std::vector<spec::ProposeItem> items;
  for (size_t i = 0; i < prompts.size(); ++i) items.push_back(Item(10 + i, 0, prompts[i], depths[i]));
  auto response = f.core->Propose(items);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->results.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(response->results[i].id, 10 + i);
    if (depths[i] == 0) {
      EXPECT_TRUE(response->results[i].draft.tokens.empty());
    } else {
      EXPECT_EQ(response->results[i].draft.tokens, Expected(prompts[i], depths[i])) << "request " << i;
    }
  }
  EXPECT_EQ(f.core->Info().live_sessions, 3);
}

TEST(DrafterCoreTest, ReleaseDropsSessionAndKv) {
  Fixture f = MakeDraftModelCore();
  ASSERT_NE(f.core, nullptr);
  const spec::WorkerInfo before = f.core->Info();
  ASSERT_TRUE(f.core->Propose({Item(1, 0, kPrompt, 4), Item(2, 0, kPrompt, 2)}).ok());
  EXPECT_LT(f.core->Info().free_blocks, before.free_blocks);
  EXPECT_EQ(f.core->Release({1, 2, 3}), 2);
  EXPECT_EQ(f.core->History(1), nullptr);
  EXPECT_EQ(f.proposer->KvLength(1), -1);
  EXPECT_EQ(f.core->Info().live_sessions, 0);
  EXPECT_EQ(f.core->Info().free_blocks, before.free_blocks);
}

TEST(DrafterCoreTest, StateMismatchIsFailedPrecondition) {
  Fixture f = MakeDraftModelCore();
  ASSERT_NE(f.core, nullptr);
  auto unknown = f.core->Propose({Item(9, 5, {1, 2}, 2)});
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ(unknown->results[0].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.core->History(9), nullptr);
  ASSERT_TRUE(f.core->Propose({Item(1, 0, kPrompt, 2)}).ok());
  auto ahead = f.core->Propose({Item(1, static_cast<int32_t>(kPrompt.size()) + 3, {4}, 2)});
  ASSERT_TRUE(ahead.ok()) << ahead.status();
  EXPECT_EQ(ahead->results[0].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*f.core->History(1), kPrompt);
}

TEST(DrafterCoreTest, SampledRequestsGetDrawnChainsWithTheirDistributions) {
  Fixture f = MakeDraftModelCore();
  ASSERT_NE(f.core, nullptr);
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5, 300};
  const int32_t vocab = f.proposer->Info().vocab_size;
  spec::ProposeItem sampled = Item(1, 0, prompt, 4);
  sampled.sampling.temperature = 1.0f;
  sampled.sampling.top_k = 50;
  sampled.sampling.seed = 11;
  spec::ProposeItem greedy = Item(2, 0, prompt, 4);
  auto response = f.core->Propose({sampled, greedy});
  ASSERT_TRUE(response.ok()) << response.status();
  const spec::DraftProposal& draft = response->results[0].draft;
  ASSERT_EQ(draft.tokens.size(), 4u);
  EXPECT_EQ(draft.parents, std::vector<int32_t>({-1, 0, 1, 2}));
  // One dense q row per node: a distribution with at most top_k entries that gives the
  // node's own token positive probability.
  ASSERT_EQ(draft.probs.size(), draft.tokens.size() * static_cast<size_t>(vocab));
  for (size_t n = 0; n < draft.tokens.size(); ++n) {
    const float* row = draft.probs.data() + n * vocab;
    double sum = 0;
    int positive = 0;
    for (int32_t j = 0; j < vocab; ++j) {
      EXPECT_GE(row[j], 0.0f);
      sum += row[j];
      positive += row[j] > 0.0f;
    }
    EXPECT_NEAR(sum, 1.0, 1e-4) << "node " << n;
    EXPECT_LE(positive, 50) << "node " << n;
    EXPECT_GT(row[draft.tokens[n]], 0.0f) << "node " << n;
  }
  // Greedy requests in the same batch keep deterministic drafts without q.
  EXPECT_EQ(response->results[1].draft.tokens, Expected(prompt, 4));
  EXPECT_TRUE(response->results[1].draft.probs.empty());
  // The draft KV holds the history and the sampled tokens fed back (all but the last).
  std::vector<int32_t> held = prompt;
  held.insert(held.end(), draft.tokens.begin(), draft.tokens.end() - 1);
  ASSERT_NE(f.proposer->KvTokens(1), nullptr);
  EXPECT_EQ(*f.proposer->KvTokens(1), held);

  // Same seed, fresh drafter: the same draws.
  Fixture again = MakeDraftModelCore();
  ASSERT_NE(again.core, nullptr);
  auto repeated = again.core->Propose({sampled});
  ASSERT_TRUE(repeated.ok()) << repeated.status();
  EXPECT_EQ(repeated->results[0].draft.tokens, draft.tokens);
  EXPECT_EQ(repeated->results[0].draft.probs, draft.probs);
}

// A sampled chain token is drawn for its position, not from a running stream: the same context
// gives the same token whichever call drafts it. The router relies on this with the pipeline,
// where a position may first be drafted as a guess or in a draft made ahead and then dropped.
TEST(DrafterCoreTest, ASampledChainTokenDependsOnItsContextNotOnEarlierCalls) {
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5, 300};
  auto sampled = [](spec::ProposeItem item) {
    item.sampling.temperature = 1.0f;
    item.sampling.seed = 11;
    return item;
  };
  Fixture whole = MakeDraftModelCore();
  ASSERT_NE(whole.core, nullptr);
  auto chain = whole.core->Propose({sampled(Item(1, 0, prompt, 4))});
  ASSERT_TRUE(chain.ok()) << chain.status();
  const std::vector<int32_t>& tokens = chain->results[0].draft.tokens;
  ASSERT_EQ(tokens.size(), 4u);

  // Another drafter first drafts a different chain after the prompt (as a dropped draft made
  // ahead would), then is told the first two tokens of `chain` were accepted: its next draft
  // starts with `chain`'s third and fourth tokens.
  Fixture stepwise = MakeDraftModelCore();
  ASSERT_NE(stepwise.core, nullptr);
  const std::vector<int32_t> other = Concat(prompt, {tokens[0] == 7 ? 8 : 7});
  ASSERT_TRUE(stepwise.core->Propose({sampled(Item(1, 0, other, 3))}).ok());
  auto rest = stepwise.core->Propose(
      {sampled(Item(1, static_cast<int32_t>(prompt.size()), {tokens[0], tokens[1]}, 2))});
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_TRUE(rest->results[0].status.ok()) << rest->results[0].status;
  EXPECT_EQ(rest->results[0].draft.tokens, std::vector<int32_t>({tokens[2], tokens[3]}));
}

TEST(DrafterCoreTest, BadItemIsRefusedAloneAndTheBatchProceeds) {
  Fixture f = MakeDraftModelCore();
  ASSERT_NE(f.core, nullptr);
  ASSERT_TRUE(f.core->Propose({Item(1, 0, kPrompt, 2)}).ok());
  const int32_t known = static_cast<int32_t>(kPrompt.size());
  // Each batch pairs a valid update of request 1 with one bad item.
  const std::vector<spec::ProposeItem> bad = {
      Item(2, 0, kPrompt, kMaxDraft + 1),  // k above the configured max
      Item(2, 0, {1, 512}, 2),             // token outside the vocabulary
      Item(2, 0, {}, 2),                   // empty history
      Item(1, known, {8}, 2),              // duplicate id in one batch
  };
  std::vector<int32_t> updated = kPrompt;
  updated.push_back(8);
  for (const spec::ProposeItem& item : bad) {
    auto response = f.core->Propose({Item(1, known, {8}, 2), item});
    ASSERT_TRUE(response.ok()) << response.status();
    ASSERT_EQ(response->results.size(), 2u);
    EXPECT_TRUE(response->results[0].status.ok()) << response->results[0].status;
    EXPECT_EQ(response->results[0].draft.tokens, Expected(updated, 2));
    EXPECT_EQ(response->results[1].status.code(), absl::StatusCode::kInvalidArgument) << response->results[1].status;
    EXPECT_TRUE(response->results[1].draft.tokens.empty());
    EXPECT_EQ(*f.core->History(1), updated);
    EXPECT_EQ(f.core->History(2), nullptr);
  }
}

TEST(DrafterCoreTest, IdleSessionsAreReclaimedAfterTheLease) {
  double now = 1000.0;
  DrafterOptions options;
  options.session_lease_seconds = 5.0;
  options.now = [&now] { return now; };
  Fixture f = MakeDraftModelCore(options);
  ASSERT_NE(f.core, nullptr);
  const int32_t free_before = f.core->Info().free_blocks;
  ASSERT_TRUE(f.core->Propose({Item(1, 0, kPrompt, 2), Item(2, 0, kPrompt, 2)}).ok());
  now += 4.0;
  const int32_t known = static_cast<int32_t>(kPrompt.size());
  ASSERT_TRUE(f.core->Propose({Item(2, known, {8}, 2)}).ok());  // 2 renews its lease
  now += 2.0;
  EXPECT_EQ(f.core->ReclaimIdle(), 1);  // 1 idle for 6 s > 5 s; 2 for 2 s
  EXPECT_EQ(f.core->History(1), nullptr);
  EXPECT_EQ(f.proposer->KvLength(1), -1);
  ASSERT_NE(f.core->History(2), nullptr);
  now += 10.0;
  EXPECT_EQ(f.core->ReclaimIdle(), 1);
  EXPECT_EQ(f.core->Info().live_sessions, 0);
  EXPECT_EQ(f.core->Info().held_tokens, 0);
  EXPECT_EQ(f.core->Info().free_blocks, free_before);
}

TEST(DrafterCoreTest, SessionAndHistoryCapsRefuseTheItemsBeyondThem) {
  DrafterOptions options;
  options.max_sessions = 2;
  options.max_history_tokens = 20;
  Fixture f = MakeDraftModelCore(options);
  ASSERT_NE(f.core, nullptr);
  const int32_t known = static_cast<int32_t>(kPrompt.size());  // 7 tokens each
  auto first = f.core->Propose({Item(1, 0, kPrompt, 2), Item(2, 0, kPrompt, 2), Item(3, 0, kPrompt, 2)});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->results[0].status.ok());
  EXPECT_TRUE(first->results[1].status.ok());
  EXPECT_EQ(first->results[2].status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(f.core->History(3), nullptr);
  EXPECT_EQ(f.core->Info().held_tokens, 14);
  // 14 + 6 = 20 fits; one more token does not.
  auto grow = f.core->Propose({Item(1, known, {5, 6, 7, 8, 9, 10}, 2)});
  ASSERT_TRUE(grow.ok());
  EXPECT_TRUE(grow->results[0].status.ok()) << grow->results[0].status;
  auto over = f.core->Propose({Item(2, known, {5}, 2)});
  ASSERT_TRUE(over.ok());
  EXPECT_EQ(over->results[0].status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*f.core->History(2), kPrompt);  // unchanged
  // Releasing makes room again.
  EXPECT_EQ(f.core->Release({1}), 1);
  EXPECT_EQ(f.core->Info().held_tokens, 7);
  auto again = f.core->Propose({Item(3, 0, kPrompt, 2)});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->results[0].status.ok()) << again->results[0].status;
}

TEST(NgramProposerTest, ProposesWhatFollowedTheLastOccurrenceAndFollowsRollbacks) {
  spec::NgramMatcherOptions options;
  options.min_n = 1;
  options.max_n = 3;
  auto proposer = NgramProposer::Create(options);
  ASSERT_TRUE(proposer.ok()) << proposer.status();
  DrafterOptions core_options;
  core_options.max_draft_tokens = 8;
  DrafterCore core(std::move(*proposer), core_options);
  // ... 10 11 12 13 ... 10 11 -> the suffix "10 11" recurs; what followed it was 12 13 14.
  const std::vector<int32_t> history = {5, 10, 11, 12, 13, 14, 6, 10, 11};
  auto response = core.Propose({Item(1, 0, history, 3)});
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->results[0].draft.tokens, std::vector<int32_t>({12, 13, 14}));
  EXPECT_EQ(response->results[0].draft.parents, std::vector<int32_t>({-1, 0, 1}));
  // The router rewinds to 8 known tokens (…, 6, 10) and sends 99: no earlier "99".
  auto rewound = core.Propose({Item(1, 8, {99}, 3)});
  ASSERT_TRUE(rewound.ok()) << rewound.status();
  EXPECT_TRUE(rewound->results[0].draft.tokens.empty());
  // Then 5 arrives: "99 5" never occurred but "5" did, followed by 10 11.
  auto again = core.Propose({Item(1, 9, {5}, 2)});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->results[0].draft.tokens, std::vector<int32_t>({10, 11}));
}

TEST(NgramProposerTest, RejectsBadOptions) {
  spec::NgramMatcherOptions options;
  options.min_n = 3;
  options.max_n = 2;
  EXPECT_EQ(NgramProposer::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace splitspec::drafter
