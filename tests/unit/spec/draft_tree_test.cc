// Tests of common/spec/draft_tree: validation errors, structure queries, the ancestor mask
// (against a brute-force walk of parents) and the shape builders.
#include "common/spec/draft_tree.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/engine/sampling/sampler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/spec/tree_limits.h"

namespace splitspec::spec {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::Limits;

void ExpectInvalid(const absl::StatusOr<DraftTree>& tree, const std::string& fragment) {
  ASSERT_FALSE(tree.ok());
  EXPECT_EQ(tree.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tree.status().message()), HasSubstr(fragment));
}

TEST(DraftTree, RejectsBadStructure) {
  ExpectInvalid(DraftTree::Create({1, 2}, {-1, 1}, {}, Limits(10)), "node 1: parent 1");
  ExpectInvalid(DraftTree::Create({1, 2, 3}, {-1, 0, 5}, {}, Limits(10)), "node 2: parent 5");
  ExpectInvalid(DraftTree::Create({1, 2}, {-1, -2}, {}, Limits(10)), "node 1: parent -2");
  ExpectInvalid(DraftTree::Create({1}, {0}, {}, Limits(10)), "node 0: parent 0");
  ExpectInvalid(DraftTree::Create({1, 2}, {-1}, {}, Limits(10)), "2 tokens but 1 parents");
  ExpectInvalid(DraftTree::Create({1, 10}, {-1, 0}, {}, Limits(10)), "node 1: token id 10");
  ExpectInvalid(DraftTree::Create({-3}, {-1}, {}, Limits(10)), "node 0: token id -3");
  ExpectInvalid(DraftTree::Chain({1, 2, 3, 4}, Limits(10, 3)), "above the limit of 3");
  ExpectInvalid(DraftTree::Chain({1}, Limits(0)), "vocab size");
  EXPECT_TRUE(DraftTree::Chain({1, 2, 3}, Limits(10, 3)).ok());
}

TEST(DraftTree, RejectsBadDraftDistributions) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto tree_with = [](DraftDistribution q) {
    return DraftTree::Create({4, 2}, {-1, 0}, {DraftDistribution{}, std::move(q)}, Limits(6));
  };
  ExpectInvalid(tree_with({{2, 7}, {0.5f, 0.5f}}), "node 1: draft distribution names token id 7");
  ExpectInvalid(tree_with({{2, 3}, {0.5f, -0.1f}}), "not a finite value");
  ExpectInvalid(tree_with({{2, 3}, {nan, 0.1f}}), "not a finite value");
  ExpectInvalid(tree_with({{2, 3}, {0.0f, 0.0f}}), "no probability mass");
  ExpectInvalid(tree_with({{3, 4}, {0.5f, 0.5f}}), "its own token 2 probability 0");
  ExpectInvalid(tree_with({{2, 3}, {0.5f}}), "2 token ids but 1 probabilities");
  ExpectInvalid(DraftTree::Create({4, 2}, {-1, 0}, {DraftDistribution{}}, Limits(6)),
                "2 nodes but 1 draft distributions");
  const absl::StatusOr<DraftTree> ok = tree_with({{2, 3}, {3.0f, 1.0f}});  // unnormalised is fine
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_FALSE(ok->has_draft_probs(0));
  EXPECT_TRUE(ok->has_draft_probs(1));
}

// Node:    0  1  2  3  4  5  6
// Parent: -1 -1  0  0  1  2  0
// Root children 0, 1; node 0 has children 2, 3, 6; node 1 has 4; node 2 has 5.
TEST(DraftTree, StructureQueries) {
  const absl::StatusOr<DraftTree> tree =
      DraftTree::Create({5, 6, 7, 8, 9, 1, 2}, {-1, -1, 0, 0, 1, 2, 0}, {}, Limits(10));
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_EQ(tree->size(), 7);
  EXPECT_THAT(tree->depths(), ElementsAre(1, 1, 2, 2, 2, 3, 2));
  EXPECT_EQ(tree->max_depth(), 3);
  EXPECT_THAT(tree->Children(-1), ElementsAre(0, 1));
  EXPECT_THAT(tree->Children(0), ElementsAre(2, 3, 6));
  EXPECT_THAT(tree->Children(1), ElementsAre(4));
  EXPECT_THAT(tree->Children(2), ElementsAre(5));
  EXPECT_THAT(tree->Children(5), ElementsAre());
  EXPECT_EQ(tree->first_child(-1), 0);
  EXPECT_EQ(tree->next_sibling(0), 1);
  EXPECT_EQ(tree->next_sibling(1), -1);
  EXPECT_EQ(tree->next_sibling(3), 6);
  EXPECT_TRUE(tree->IsLeaf(5));
  EXPECT_FALSE(tree->IsLeaf(-1));
  EXPECT_THAT(tree->PathTo(5), ElementsAre(0, 2, 5));
  EXPECT_THAT(tree->PathTo(4), ElementsAre(1, 4));
  EXPECT_THAT(tree->PathTo(-1), ElementsAre());
  EXPECT_THAT(tree->ParentsWithRoot(), ElementsAre(-1, 0, 0, 1, 1, 2, 3, 1));
  EXPECT_THAT(tree->TokensWithRoot(3), ElementsAre(3, 5, 6, 7, 8, 9, 1, 2));

  // Written out by hand: row i marks i's ancestors and i itself.
  const std::vector<uint8_t> expected = {
      1, 0, 0, 0, 0, 0, 0,  //
      0, 1, 0, 0, 0, 0, 0,  //
      1, 0, 1, 0, 0, 0, 0,  //
      1, 0, 0, 1, 0, 0, 0,  //
      0, 1, 0, 0, 1, 0, 0,  //
      1, 0, 1, 0, 0, 1, 0,  //
      1, 0, 0, 0, 0, 0, 1,  //
  };
  EXPECT_EQ(tree->AncestorMask(), expected);
}

TEST(DraftTree, EmptyTree) {
  const DraftTree empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.max_depth(), 0);
  EXPECT_EQ(empty.first_child(-1), -1);
  EXPECT_TRUE(empty.AncestorMask().empty());
  EXPECT_THAT(empty.ParentsWithRoot(), ElementsAre(-1));
  const absl::StatusOr<DraftTree> built = DraftTree::Chain({}, Limits(4));
  ASSERT_TRUE(built.ok());
  EXPECT_TRUE(built->empty());
}

TEST(DraftTree, RandomTreesMatchBruteForce) {
  engine::Rng rng(31);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = static_cast<int>(rng.NextU64() % 40);
    std::vector<int32_t> tokens, parents;
    for (int i = 0; i < n; ++i) {
      tokens.push_back(static_cast<int32_t>(rng.NextU64() % 50));
      parents.push_back(static_cast<int32_t>(rng.NextU64() % (i + 1)) - 1);
    }
    const absl::StatusOr<DraftTree> tree = DraftTree::Create(tokens, parents, {}, Limits(50));
    ASSERT_TRUE(tree.ok()) << tree.status();
    const std::vector<uint8_t> mask = tree->AncestorMask();
    ASSERT_EQ(mask.size(), static_cast<size_t>(n * n));
    int max_depth = 0;
    for (int i = 0; i < n; ++i) {
      // Walk up the parent chain: that is the ancestor set, its length the depth.
      std::vector<uint8_t> row(n, 0);
      int depth = 0;
      for (int at = i; at >= 0; at = parents[at]) {
        row[at] = 1;
        ++depth;
      }
      max_depth = std::max(max_depth, depth);
      EXPECT_EQ(tree->depth(i), depth);
      EXPECT_EQ(std::vector<uint8_t>(mask.begin() + i * n, mask.begin() + (i + 1) * n), row);
      const std::vector<int32_t> path = tree->PathTo(i);
      ASSERT_EQ(static_cast<int>(path.size()), depth);
      EXPECT_EQ(path.back(), i);
      EXPECT_EQ(tree->parent(path.front()), -1);
      for (size_t j = 1; j < path.size(); ++j) EXPECT_EQ(tree->parent(path[j]), path[j - 1]);
    }
    EXPECT_EQ(tree->max_depth(), max_depth);
    // Children lists partition the nodes by parent, in index order.
    for (int p = -1; p < n; ++p) {
      std::vector<int32_t> expected;
      for (int i = 0; i < n; ++i) {
        if (parents[i] == p) expected.push_back(i);
      }
      EXPECT_EQ(tree->Children(p), expected);
    }
  }
}

TEST(DraftTreeBuilders, Chain) {
  EXPECT_THAT(ChainParents(4), ElementsAre(-1, 0, 1, 2));
  EXPECT_THAT(ChainParents(0), ElementsAre());
  const absl::StatusOr<DraftTree> chain = DraftTree::Chain({3, 1, 4, 1}, Limits(5));
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(chain->max_depth(), 4);
  EXPECT_THAT(chain->PathTo(3), ElementsAre(0, 1, 2, 3));
  for (int i = 0; i < 3; ++i) EXPECT_THAT(chain->Children(i), ElementsAre(i + 1));
}

TEST(DraftTreeBuilders, TopKPerDepth) {
  const absl::StatusOr<std::vector<int32_t>> parents = TopKPerDepthParents({2, 3}, 100);
  ASSERT_TRUE(parents.ok());
  EXPECT_THAT(*parents, ElementsAre(-1, -1, 0, 0, 0, 1, 1, 1));
  const absl::StatusOr<std::vector<int32_t>> deep = TopKPerDepthParents({2, 2, 1}, 100);
  ASSERT_TRUE(deep.ok());
  EXPECT_THAT(*deep, ElementsAre(-1, -1, 0, 0, 1, 1, 2, 3, 4, 5));
  EXPECT_THAT(*TopKPerDepthParents({}, 10), ElementsAre());
  // 2 + 6 = 8 nodes.
  EXPECT_TRUE(TopKPerDepthParents({2, 3}, 8).ok());
  EXPECT_EQ(TopKPerDepthParents({2, 3}, 7).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TopKPerDepthParents({2, 0}, 10).status().code(), absl::StatusCode::kInvalidArgument);
  // The shape makes a valid tree with the expected depth profile.
  const absl::StatusOr<DraftTree> tree =
      DraftTree::Create(std::vector<int32_t>(deep->size(), 0), *deep, {}, Limits(2));
  ASSERT_TRUE(tree.ok());
  EXPECT_THAT(tree->depths(), ElementsAre(1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
}

TEST(DraftTreeBuilder, BuildsAndValidates) {
  DraftTreeBuilder builder;
  const int32_t a = builder.Add(-1, 3);
  const int32_t b = builder.Add(a, 2, DraftDistribution{{2, 1}, {0.75f, 0.25f}});
  builder.Add(a, 1);
  builder.Add(b, 0);
  EXPECT_EQ(builder.size(), 4);
  const absl::StatusOr<DraftTree> tree = std::move(builder).Build(Limits(4));
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_THAT(tree->parents(), ElementsAre(-1, 0, 0, 1));
  EXPECT_TRUE(tree->has_draft_probs(1));
  EXPECT_FALSE(tree->has_draft_probs(2));

  DraftTreeBuilder plain;
  plain.Add(-1, 1);
  const absl::StatusOr<DraftTree> no_q = std::move(plain).Build(Limits(4));
  ASSERT_TRUE(no_q.ok());
  EXPECT_FALSE(no_q->has_draft_probs(0));

  DraftTreeBuilder bad;
  bad.Add(-1, 1);
  bad.Add(3, 1);
  ExpectInvalid(std::move(bad).Build(Limits(4)), "node 1: parent 3");
}

TEST(DraftDistribution, FromDenseKeepsPositiveEntries) {
  const DraftDistribution q = DraftDistribution::FromDense(std::vector<float>{0, 0.5f, 0, 0.5f});
  EXPECT_THAT(q.token_ids, ElementsAre(1, 3));
  EXPECT_THAT(q.probs, ElementsAre(0.5f, 0.5f));
}

}  // namespace
}  // namespace splitspec::spec
