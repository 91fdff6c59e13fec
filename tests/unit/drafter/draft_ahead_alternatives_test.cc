// Drafts made ahead over several outcomes (spec::ProposeItem::assumed_tokens, alternatives):
// the draft after the hypothesis and after each other outcome equals what a fresh session
// drafts after the same tokens; the session's committed history leaves the assumed tokens out;
// whichever outcome the verifier then takes (covered or not), the draft model's state equals a
// fresh prefill of the committed tokens; bad hypotheses are refused item by item.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "drafter/draft_model_proposer.h"
#include "drafter/drafter_core.h"
#include "drafter/ngram_proposer.h"
#include "tests/unit/drafter/propose_items.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec::drafter {
namespace {

using splitspec::testing::GetTestModels;
using testing::Concat;
using testing::Item;

constexpr int32_t kDepth = 3;

std::unique_ptr<DrafterCore> MakeCore() {
  DraftModelOptions options;
  options.model_dir = GetTestModels().draft_dir;
  options.kv_blocks = 128;
  options.n_threads = 1;
  auto proposer = DraftModelProposer::Create(options);
  EXPECT_TRUE(proposer.ok()) << proposer.status();
  if (!proposer.ok()) return nullptr;
  DrafterOptions core_options;
  core_options.max_draft_tokens = 8;
  return std::make_unique<DrafterCore>(std::move(*proposer), core_options);
}

const std::vector<int32_t> kAheadPrompt = {1, 17, 42, 99, 5, 300, 12, 7, 64};

// A session holding kAheadPrompt, then a draft made ahead on the hypothesis that the step now
// verifying the draft model's own chain of kDepth emits that chain and its guess (greedy
// unless `sampling` says otherwise; a sampled chain and guess are the draft's draws).
struct Ahead {
  std::vector<int32_t> hypothesis;
  spec::ProposeResult result;
};
Ahead DraftAhead(DrafterCore& core, spec::RequestId id, int32_t alternatives,
                 const engine::SamplingParams& sampling = {}) {
  spec::ProposeItem start = Item(id, 0, kAheadPrompt, kDepth + 1);
  start.sampling = sampling;
  auto first = core.Propose({start});
  EXPECT_TRUE(first.ok() && first->results[0].status.ok());
  Ahead ahead;
  if (!first.ok()) return ahead;
  ahead.hypothesis = first->results[0].draft.tokens;
  spec::ProposeItem item = Item(id, static_cast<int32_t>(kAheadPrompt.size()), ahead.hypothesis, kDepth);
  item.sampling = sampling;
  item.assumed_tokens = static_cast<int32_t>(ahead.hypothesis.size());
  item.alternatives = alternatives;
  auto second = core.Propose({item});
  EXPECT_TRUE(second.ok()) << second.status();
  if (second.ok()) ahead.result = second->results[0];
  EXPECT_TRUE(ahead.result.status.ok()) << ahead.result.status;
  return ahead;
}

// The chain a session that never saw anything else drafts after `history`.
spec::DraftProposal FreshProposal(const std::vector<int32_t>& history, int32_t depth,
                                  const engine::SamplingParams& sampling = {}) {
  auto core = MakeCore();
  spec::ProposeItem item = Item(1, 0, history, depth);
  item.sampling = sampling;
  auto out = core->Propose({item});
  EXPECT_TRUE(out.ok() && out->results[0].status.ok());
  return out.ok() ? out->results[0].draft : spec::DraftProposal{};
}
std::vector<int32_t> FreshDraft(const std::vector<int32_t>& history, int32_t depth) {
  return FreshProposal(history, depth).tokens;
}

// An alternative's outcome: a prefix of the hypothesis, then another token than the hypothesis
// has there, and no outcome drafted twice (`seen` collects them). Returns where it branches.
size_t ExpectAnotherOutcome(const spec::AlternativeDraft& alternative, const std::vector<int32_t>& hypothesis,
                            std::set<std::vector<int32_t>>* seen) {
  const size_t j = alternative.assumed.size() - 1;
  EXPECT_LT(j, hypothesis.size());
  if (j >= hypothesis.size()) return j;
  EXPECT_TRUE(std::equal(alternative.assumed.begin(), alternative.assumed.end() - 1, hypothesis.begin()));
  EXPECT_NE(alternative.assumed.back(), hypothesis[j]);
  EXPECT_TRUE(seen->insert(alternative.assumed).second) << "an outcome drafted twice";
  return j;
}

// a and b hold the same tokens, tree and q rows, bit for bit.
void ExpectSameDraft(const spec::DraftProposal& a, const spec::DraftProposal& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.parents, b.parents) << what;
  ASSERT_EQ(a.probs.size(), b.probs.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.probs.data(), b.probs.data(), a.probs.size() * sizeof(float))) << what;
}

TEST(DraftAheadAlternativesTest, EachOutcomesDraftIsWhatAFreshSessionDrafts) {
  auto core = MakeCore();
  const Ahead ahead = DraftAhead(*core, 5, 4);
  ASSERT_EQ(ahead.hypothesis.size(), static_cast<size_t>(kDepth + 1));
  EXPECT_EQ(ahead.result.draft.tokens, FreshDraft(Concat(kAheadPrompt, ahead.hypothesis), kDepth));
  EXPECT_EQ(ahead.result.draft.parents, (std::vector<int32_t>{-1, 0, 1}));
  ASSERT_EQ(ahead.result.alternatives.size(), 4u);
  std::set<std::vector<int32_t>> outcomes;
  for (const spec::AlternativeDraft& alternative : ahead.result.alternatives) {
    ExpectAnotherOutcome(alternative, ahead.hypothesis, &outcomes);
    EXPECT_EQ(alternative.draft.tokens, FreshDraft(Concat(kAheadPrompt, alternative.assumed), kDepth))
        << "after an alternative of " << alternative.assumed.size() << " tokens";
  }
  // The session's committed history leaves the hypothesis out.
  ASSERT_NE(core->History(5), nullptr);
  EXPECT_EQ(*core->History(5), kAheadPrompt);
}

// A sampled request's hypothesis is the draft's own draws; each outcome's draft is what a fresh
// session draws after the same tokens with the same seed, q rows and all (a chain token's draw
// is keyed by its position), so a seeded request's output does not depend on which outcome the
// router had drafted for. Each alternative puts a token the draft can draw (q > 0) where the
// hypothesis had another.
TEST(DraftAheadAlternativesTest, SampledOutcomesDrawWhatAFreshSessionDraws) {
  engine::SamplingParams sampling;
  sampling.temperature = 0.9f;
  sampling.top_k = 64;
  sampling.seed = 77;
  auto core = MakeCore();
  const Ahead ahead = DraftAhead(*core, 5, 3, sampling);
  ASSERT_EQ(ahead.hypothesis.size(), static_cast<size_t>(kDepth + 1));
  const int32_t vocab = core->Info().vocab_size;
  const spec::DraftProposal& main = ahead.result.draft;
  ASSERT_EQ(main.tokens.size(), static_cast<size_t>(kDepth));
  EXPECT_EQ(main.probs.size(), main.tokens.size() * static_cast<size_t>(vocab));
  ExpectSameDraft(main, FreshProposal(Concat(kAheadPrompt, ahead.hypothesis), kDepth, sampling), "after the hypothesis");
  ASSERT_EQ(ahead.result.alternatives.size(), 3u);
  std::set<std::vector<int32_t>> outcomes;
  for (const spec::AlternativeDraft& alternative : ahead.result.alternatives) {
    const size_t j = ExpectAnotherOutcome(alternative, ahead.hypothesis, &outcomes);
    ASSERT_LT(j, ahead.hypothesis.size());
    // The draft's q at position j, as a fresh session drafting there gives it.
    const spec::DraftProposal at_j =
        FreshProposal(Concat(kAheadPrompt, std::vector<int32_t>(ahead.hypothesis.begin(), ahead.hypothesis.begin() + j)),
                      1, sampling);
    ASSERT_EQ(at_j.probs.size(), static_cast<size_t>(vocab));
    EXPECT_GT(at_j.probs[alternative.assumed.back()], 0.0f) << "an alternative the draft cannot draw";
    ExpectSameDraft(alternative.draft, FreshProposal(Concat(kAheadPrompt, alternative.assumed), kDepth, sampling),
                    "after an alternative of " + std::to_string(alternative.assumed.size()) + " tokens");
  }
  EXPECT_EQ(*core->History(5), kAheadPrompt);
}

// After the verify step the drafter learns what was committed in the next Propose (a sampled
// one here, whose q rows show the logits bit for bit): its draft and state equal a fresh
// session's, whether the hypothesis held, an alternative did, or an outcome nobody drafted for.
TEST(DraftAheadAlternativesTest, AfterAnyOutcomeTheStateEqualsAFreshPrefill) {
  auto probe = MakeCore();
  const Ahead reference_ahead = DraftAhead(*probe, 5, 3);
  ASSERT_EQ(reference_ahead.result.alternatives.size(), 3u);
  std::vector<std::vector<int32_t>> outcomes = {reference_ahead.hypothesis,
                                                reference_ahead.result.alternatives[0].assumed,
                                                reference_ahead.result.alternatives[2].assumed};
  // Not drafted for: the first hypothesis token kept, then a token no alternative has there.
  std::vector<int32_t> uncovered = {reference_ahead.hypothesis[0], 0};
  for (const spec::AlternativeDraft& a : reference_ahead.result.alternatives) {
    if (a.assumed.size() == 2 && a.assumed[1] == uncovered[1]) ++uncovered[1];
  }
  if (uncovered[1] == reference_ahead.hypothesis[1]) ++uncovered[1];
  outcomes.push_back(uncovered);

  spec::ProposeItem next = Item(5, static_cast<int32_t>(kAheadPrompt.size()), {}, kDepth);
  next.sampling.temperature = 0.8f;
  next.sampling.seed = 1234;
  for (const std::vector<int32_t>& emitted : outcomes) {
    auto core = MakeCore();
    DraftAhead(*core, 5, 3);
    next.new_tokens = emitted;
    auto after = core->Propose({next});
    ASSERT_TRUE(after.ok() && after->results[0].status.ok());

    auto fresh = MakeCore();
    spec::ProposeItem whole = next;
    whole.known_length = 0;
    whole.new_tokens = Concat(kAheadPrompt, emitted);
    auto expected = fresh->Propose({whole});
    ASSERT_TRUE(expected.ok() && expected->results[0].status.ok());
    const spec::DraftProposal& a = after->results[0].draft;
    const spec::DraftProposal& b = expected->results[0].draft;
    EXPECT_EQ(a.tokens, b.tokens) << "outcome of " << emitted.size() << " tokens";
    ASSERT_EQ(a.probs.size(), b.probs.size());
    EXPECT_EQ(0, std::memcmp(a.probs.data(), b.probs.data(), a.probs.size() * sizeof(float)))
        << "outcome of " << emitted.size() << " tokens";
    const auto* held = static_cast<DraftModelProposer&>(core->proposer()).KvTokens(5);
    const auto* fresh_held = static_cast<DraftModelProposer&>(fresh->proposer()).KvTokens(5);
    ASSERT_NE(held, nullptr);
    ASSERT_NE(fresh_held, nullptr);
    EXPECT_EQ(*held, *fresh_held);
  }
}

TEST(DraftAheadAlternativesTest, BadHypothesesAreRefusedAlone) {
  auto core = MakeCore();
  ASSERT_TRUE(core->Propose({Item(7, 0, kAheadPrompt, 2)}).ok());
  const int32_t known = static_cast<int32_t>(kAheadPrompt.size());
  std::vector<spec::ProposeItem> items;
  items.push_back(Item(1, 0, {4, 5}, 2));  // every token assumed: no committed history
  items.back().assumed_tokens = 2;
  items.push_back(Item(2, 0, {4, 5}, 2));  // more assumed tokens than new ones
  items.back().assumed_tokens = 3;
  items.push_back(Item(3, 0, {4, 5, 6}, 2));  // more alternatives than assumed tokens
  items.back().assumed_tokens = 1;
  items.back().alternatives = 2;
  items.push_back(Item(7, known, {8, 9, 10}, 2));  // good: two assumed, one alternative
  items.back().assumed_tokens = 2;
  items.back().alternatives = 1;
  items.push_back(Item(4, 0, {4, 5, 6}, 2));  // good: a sampled one, with one alternative
  items.back().assumed_tokens = 2;
  items.back().alternatives = 1;
  items.back().sampling.temperature = 0.7f;
  auto out = core->Propose(items);
  ASSERT_TRUE(out.ok()) << out.status();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(absl::IsInvalidArgument(out->results[i].status)) << i << ": " << out->results[i].status;
    EXPECT_EQ(core->History(out->results[i].id), nullptr) << "a refused item opened a session";
  }
  for (int i = 3; i < 5; ++i) {
    ASSERT_TRUE(out->results[i].status.ok()) << i << ": " << out->results[i].status;
    EXPECT_EQ(out->results[i].draft.tokens.size(), 2u);
    EXPECT_EQ(out->results[i].alternatives.size(), 1u);
  }
  EXPECT_EQ(*core->History(7), Concat(kAheadPrompt, {8}));
  EXPECT_EQ(*core->History(4), (std::vector<int32_t>{4}));
}

// A proposer without a KV cache (n-gram) drafts after the assumed tokens as after any history
// and offers no alternatives; the session still keeps them out of its committed history.
TEST(DraftAheadAlternativesTest, AnNgramDrafterLeavesTheAssumedTokensUncommitted) {
  auto ngram = NgramProposer::Create(spec::NgramMatcherOptions{});
  ASSERT_TRUE(ngram.ok());
  DrafterOptions options;
  options.max_draft_tokens = 8;
  DrafterCore core(std::move(*ngram), options);
  const std::vector<int32_t> history = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2};
  spec::ProposeItem item = Item(3, 0, Concat(history, {3}), 2);
  item.assumed_tokens = 1;
  item.alternatives = 1;
  auto out = core.Propose({item});
  ASSERT_TRUE(out.ok() && out->results[0].status.ok());
  EXPECT_EQ(out->results[0].draft.tokens, (std::vector<int32_t>{4, 1}));
  EXPECT_TRUE(out->results[0].alternatives.empty());
  EXPECT_EQ(*core.History(3), history);
}

}  // namespace
}  // namespace splitspec::drafter
