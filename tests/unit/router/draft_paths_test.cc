// Draft tree paths: the accepted path, the main path (the chain inside a tree) and how a tree's
// verification reads as its main path's.
#include "router/draft_paths.h"

#include <gtest/gtest.h>

#include <vector>

namespace splitspec::router {
namespace {

// Root children 10 (best) and 11; 10's children 20 (best) and 21; 11's child 22; 20's child 30.
//   node:    0   1   2   3   4   5
//   token:  10  11  20  21  22  30
//   parent: -1  -1   0   0   1   2
spec::DraftProposal Tree() {
  spec::DraftProposal d;
  d.tokens = {10, 11, 20, 21, 22, 30};
  d.parents = {-1, -1, 0, 0, 1, 2};
  return d;
}

TEST(DraftPathsTest, MainPathFollowsEachNodesFirstChild) {
  EXPECT_EQ(MainPath(Tree()), (std::vector<int32_t>{0, 2, 5}));
  spec::DraftProposal chain;
  chain.tokens = {1, 2, 3};
  chain.parents = {-1, 0, 1};
  EXPECT_EQ(MainPath(chain), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(MainPath(spec::DraftProposal{}).empty());
}

TEST(DraftPathsTest, AcceptedPathWalksTheTokensDownTheTree) {
  const spec::DraftProposal d = Tree();
  EXPECT_EQ(AcceptedPath(d, std::vector<int32_t>{11, 22}), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(AcceptedPath(d, std::vector<int32_t>{10, 21}), (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(AcceptedPath(d, std::vector<int32_t>{10, 22}), (std::vector<int32_t>{0}));  // leaves the tree
  EXPECT_TRUE(HasChildren(d, 0));
  EXPECT_FALSE(HasChildren(d, 3));
  EXPECT_TRUE(HasChildren(d, -1));
}

TEST(DraftPathsTest, TreeOutcomeReadsAsItsMainPathsVerification) {
  const spec::DraftProposal d = Tree();
  auto outcome = [&](std::vector<int32_t> tokens) {
    return MainPathOutcome(d, AcceptedPath(d, tokens));
  };
  // The whole main path accepted: 3 of 3.
  EXPECT_EQ(outcome({10, 20, 30}).proposed, 3);
  EXPECT_EQ(outcome({10, 20, 30}).accepted, 3);
  // A sibling of the main path's second node: the chain's second token was rejected.
  EXPECT_EQ(outcome({10, 21}).accepted, 1);
  // The first root child rejected, the second accepted: the chain failed at once.
  EXPECT_EQ(outcome({11, 22}).accepted, 0);
  EXPECT_EQ(outcome({}).accepted, 0);
  EXPECT_EQ(outcome({}).proposed, 3);
}

}  // namespace
}  // namespace splitspec::router
