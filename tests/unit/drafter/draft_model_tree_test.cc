// The draft model growing trees (one batched forward per depth over the tree nodes it
// expands): proposals are well-formed trees within the shape; a batch mixing trees and chains
// gives each request what it gets alone; and after a tree step whose path the verifier
// accepted, the drafter's state equals a fresh prefill of the committed tokens.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "drafter/draft_model_proposer.h"
#include "tests/unit/drafter/propose_items.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec::drafter {
namespace {

using splitspec::testing::GetTestModels;
using splitspec::testing::GreedyReference;

std::unique_ptr<DraftModelProposer> MakeProposer() {
  DraftModelOptions options;
  options.model_dir = GetTestModels().draft_dir;
  options.kv_blocks = 128;
  options.n_threads = 1;
  auto proposer = DraftModelProposer::Create(options);
  EXPECT_TRUE(proposer.ok()) << proposer.status();
  return proposer.ok() ? std::move(*proposer) : nullptr;
}

using testing::Task;

std::vector<int32_t> Prompt() {
  std::vector<int32_t> prompt = {1, 17, 42, 99, 5, 300};
  const std::vector<int32_t> tail = GreedyReference(GetTestModels().target_dir, prompt, 10);
  prompt.insert(prompt.end(), tail.begin(), tail.end());
  return prompt;
}

void ExpectSame(const spec::DraftProposal& a, const spec::DraftProposal& b, const char* what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.parents, b.parents) << what;
  EXPECT_EQ(a.scores, b.scores) << what;  // bit for bit: the same logits produced them
}

TEST(DraftModelTreeTest, TreesStayWithinTheShape) {
  auto proposer = MakeProposer();
  ASSERT_NE(proposer, nullptr);
  const std::vector<int32_t> history = Prompt();
  const spec::ProposalShape shape{/*depth=*/4, /*branching=*/3, /*max_nodes=*/10};
  auto out = proposer->Propose({Task(1, &history, shape)});
  ASSERT_TRUE(out.ok()) << out.status();
  const spec::DraftProposal& d = (*out)[0];
  EXPECT_EQ(d.tokens.size(), 10u);
  std::vector<int32_t> depth(d.tokens.size());
  int32_t deepest = 0;
  for (size_t j = 0; j < d.tokens.size(); ++j) {
    ASSERT_LT(d.parents[j], static_cast<int32_t>(j));
    depth[j] = d.parents[j] < 0 ? 1 : depth[d.parents[j]] + 1;
    deepest = std::max(deepest, depth[j]);
  }
  EXPECT_EQ(deepest, 4);
  // The greedy chain's first token is the most probable child of the root.
  auto chain = proposer->Propose({Task(2, &history, spec::ProposalShape{1, 1, 0})});
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(d.tokens[0], (*chain)[0].tokens[0]);
  EXPECT_EQ(d.parents[0], -1);
}

TEST(DraftModelTreeTest, MixedBatchGivesEachRequestItsSoloProposal) {
  const std::vector<int32_t> a = Prompt();
  std::vector<int32_t> b = {1, 9, 8, 7, 6, 5, 4, 3};
  const spec::ProposalShape tree{3, 2, 6}, chain{3, 1, 0};
  auto batched = MakeProposer();
  auto solo = MakeProposer();
  ASSERT_NE(batched, nullptr);
  ASSERT_NE(solo, nullptr);
  auto both = batched->Propose({Task(1, &a, tree), Task(2, &b, chain), Task(3, &b, tree)});
  ASSERT_TRUE(both.ok()) << both.status();
  auto one = solo->Propose({Task(1, &a, tree)});
  auto two = solo->Propose({Task(2, &b, chain)});
  auto three = solo->Propose({Task(3, &b, tree)});
  ASSERT_TRUE(one.ok() && two.ok() && three.ok());
  ExpectSame((*both)[0], (*one)[0], "tree a");
  ExpectSame((*both)[1], (*two)[0], "chain b");
  ExpectSame((*both)[2], (*three)[0], "tree b");
}

TEST(DraftModelTreeTest, StateAfterAnAcceptedTreePathEqualsAFreshPrefill) {
  auto proposer = MakeProposer();
  ASSERT_NE(proposer, nullptr);
  const spec::ProposalShape tree{/*depth=*/4, /*branching=*/3, /*max_nodes=*/12};
  for (int accepted_depth : {0, 1, 2, 4}) {
    const spec::RequestId id = 10 + accepted_depth;
    std::vector<int32_t> history = Prompt();
    auto first = proposer->Propose({Task(id, &history, tree)});
    ASSERT_TRUE(first.ok()) << first.status();
    const spec::DraftProposal& d = (*first)[0];
    // The verifier accepts the path to the last node at `accepted_depth` (a later sibling,
    // not the first, where there is one), then emits a bonus token.
    int32_t end = -1;
    std::vector<int32_t> depth(d.tokens.size());
    for (size_t j = 0; j < d.tokens.size(); ++j) {
      depth[j] = d.parents[j] < 0 ? 1 : depth[d.parents[j]] + 1;
      if (depth[j] == accepted_depth) end = static_cast<int32_t>(j);
    }
    std::vector<int32_t> path;
    for (int32_t j = end; j >= 0; j = d.parents[j]) path.insert(path.begin(), d.tokens[j]);
    ASSERT_EQ(static_cast<int>(path.size()), accepted_depth);
    history.insert(history.end(), path.begin(), path.end());
    history.push_back(77);  // the bonus
    auto next = proposer->Propose({Task(id, &history, tree)});
    ASSERT_TRUE(next.ok()) << next.status();
    ASSERT_NE(proposer->KvTokens(id), nullptr);
    EXPECT_EQ(*proposer->KvTokens(id), history) << "accepted depth " << accepted_depth;

    auto fresh = MakeProposer();
    ASSERT_NE(fresh, nullptr);
    auto reference = fresh->Propose({Task(id, &history, tree)});
    ASSERT_TRUE(reference.ok());
    ExpectSame((*next)[0], (*reference)[0], "after the committed path");
    proposer->Release(id);
  }
}

}  // namespace
}  // namespace splitspec::drafter
