// Lookup trees: continuations merged into a trie and cut best first (count, then recency),
// within depth, branching and budget; and the n-gram proposer's trees from a real history.
#include "drafter/continuation_trie.h"

#include <gtest/gtest.h>

#include <vector>

#include "drafter/ngram_proposer.h"

namespace splitspec::drafter {
namespace {

TEST(ContinuationTrieTest, MergesContinuationsAndCutsTheMostFrequentFirst) {
  // Most recent first: 5 6 7, then 5 6 8, then 5 9, then 4.
  const ContinuationTrie trie({{5, 6, 7}, {5, 6, 8}, {5, 9}, {4}});
  const spec::DraftProposal d = trie.Cut(/*depth=*/3, /*branching=*/2, /*max_nodes=*/5);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{5, 6, 7, 8, 9}));
  EXPECT_EQ(d.parents, (std::vector<int32_t>{-1, 0, 1, 1, 0}));
  ASSERT_EQ(d.scores.size(), 5u);
  EXPECT_FLOAT_EQ(d.scores[0], 3.0f / 4.0f);  // 5 began three continuations of four
  EXPECT_FLOAT_EQ(d.scores[1], 2.0f / 3.0f);
  EXPECT_FLOAT_EQ(d.scores[2], 1.0f / 2.0f);
  EXPECT_FLOAT_EQ(d.scores[4], 1.0f / 3.0f);
}

TEST(ContinuationTrieTest, RespectsBranchingDepthAndBudget) {
  const ContinuationTrie trie({{5, 6, 7}, {5, 6, 8}, {5, 9}, {4}});
  EXPECT_EQ(trie.Cut(3, 1, 8).tokens, (std::vector<int32_t>{5, 6, 7}));  // a chain
  EXPECT_EQ(trie.Cut(1, 4, 8).tokens, (std::vector<int32_t>{5, 4}));     // one level
  EXPECT_EQ(trie.Cut(3, 4, 2).tokens, (std::vector<int32_t>{5, 6}));     // two nodes
  EXPECT_TRUE(ContinuationTrie({}).Cut(3, 2, 8).tokens.empty());
}

TEST(NgramTreeTest, TreesMergeEveryEarlierContinuationAndChainsStayTheMostRecent) {
  auto proposer = NgramProposer::Create(spec::NgramMatcherOptions{1, 3});
  ASSERT_TRUE(proposer.ok());
  // "1 2" was followed by 3 twice and by 4 once (most recently).
  const std::vector<int32_t> history = {1, 2, 3, 9, 1, 2, 3, 9, 1, 2, 4, 9, 1, 2};
  ProposeTask chain;
  chain.id = 1;
  chain.history = &history;
  chain.shape = spec::ProposalShape{2, 1, 0};
  ProposeTask tree = chain;
  tree.id = 2;
  tree.shape = spec::ProposalShape{2, 2, 6};
  auto out = (*proposer)->Propose({chain, tree});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].tokens, (std::vector<int32_t>{4, 9}));  // unchanged: the most recent
  const spec::DraftProposal& t = (*out)[1];
  ASSERT_GE(t.tokens.size(), 2u);
  EXPECT_EQ(t.tokens[0], 3);  // the most frequent first
  EXPECT_EQ(t.parents[0], -1);
  bool has_four = false;
  for (size_t j = 0; j < t.tokens.size(); ++j) has_four |= t.tokens[j] == 4 && t.parents[j] == -1;
  EXPECT_TRUE(has_four) << "the other continuation is a sibling";
  for (size_t j = 0; j < t.tokens.size(); ++j) EXPECT_LT(t.parents[j], static_cast<int32_t>(j));
}

}  // namespace
}  // namespace splitspec::drafter
