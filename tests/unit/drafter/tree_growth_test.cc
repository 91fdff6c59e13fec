// TreeGrowth on synthetic draft distributions: trees stay within depth, branching and budget,
// spend the budget when the distributions allow, rank greedy children by probability, and
// draw sampled siblings without replacement, each carrying the q it was drawn from.
#include "drafter/tree_growth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

namespace splitspec::drafter {
namespace {

constexpr int32_t kVocab = 50;

// A distribution over kVocab that differs per (salt): peaked at a few tokens.
std::vector<float> Row(uint64_t salt) {
  std::vector<float> q(kVocab);
  double sum = 0;
  for (int32_t t = 0; t < kVocab; ++t) {
    const uint64_t h = (salt + 1) * 0x9E3779B97F4A7C15ULL ^ (t + 1) * 0xBF58476D1CE4E5B9ULL;
    q[t] = static_cast<float>(std::pow(static_cast<double>((h >> 20) % 1000) / 1000.0, 6));
    sum += q[t];
  }
  for (float& v : q) v = static_cast<float>(v / sum);
  return q;
}

// Grows a tree to completion; node rows are derived from the node's token and depth.
spec::DraftProposal Grow(const TreeGrowthOptions& options, engine::Rng* rng, std::vector<std::vector<float>>* rows_seen = nullptr) {
  TreeGrowth growth(options);
  int guard = 0;
  while (!growth.Expanding().empty() && ++guard < 100) {
    std::vector<std::vector<float>> rows;
    for (int32_t node : growth.Expanding()) {
      rows.push_back(Row(node < 0 ? 999 : static_cast<uint64_t>(growth.token(node)) * 31 + node));
    }
    if (rows_seen != nullptr) rows_seen->insert(rows_seen->end(), rows.begin(), rows.end());
    growth.AddChildren(rows, rng);
  }
  return growth.Proposal();
}

void ExpectWellFormed(const spec::DraftProposal& d, const TreeGrowthOptions& o) {
  ASSERT_EQ(d.tokens.size(), d.parents.size());
  ASSERT_EQ(d.scores.size(), d.tokens.size());
  EXPECT_LE(static_cast<int32_t>(d.tokens.size()), o.budget);
  std::vector<int32_t> depth(d.tokens.size()), children(d.tokens.size() + 1, 0);
  for (size_t j = 0; j < d.tokens.size(); ++j) {
    ASSERT_GE(d.parents[j], -1);
    ASSERT_LT(d.parents[j], static_cast<int32_t>(j));
    depth[j] = d.parents[j] < 0 ? 1 : depth[d.parents[j]] + 1;
    EXPECT_LE(depth[j], o.depth);
    EXPECT_LE(++children[d.parents[j] + 1], o.branching);
    EXPECT_GT(d.scores[j], 0.0f);
    EXPECT_LE(d.scores[j], 1.0f);
    for (size_t i = 0; i < j; ++i) {
      if (d.parents[i] == d.parents[j]) {
        EXPECT_NE(d.tokens[i], d.tokens[j]) << "siblings repeat a token";
      }
    }
  }
}

TEST(TreeGrowthTest, GreedyTreesRespectTheShapeAndSpendTheBudget) {
  for (TreeGrowthOptions o : {TreeGrowthOptions{4, 3, 10, false}, TreeGrowthOptions{5, 4, 16, false},
                              TreeGrowthOptions{1, 4, 4, false}, TreeGrowthOptions{6, 2, 32, false}}) {
    const spec::DraftProposal d = Grow(o, nullptr);
    ExpectWellFormed(d, o);
    // Peaked but full-support rows always offer enough children to fill the budget, unless
    // depth x branching limits it.
    int32_t reachable = 0, level = 1;
    for (int32_t l = 1; l <= o.depth; ++l) reachable += (level *= o.branching);
    EXPECT_EQ(static_cast<int32_t>(d.tokens.size()), std::min(o.budget, reachable));
    EXPECT_TRUE(d.probs.empty());
  }
}

TEST(TreeGrowthTest, GreedyRootChildrenAreTheMostProbableTokensInOrder) {
  const TreeGrowthOptions o{3, 3, 9, false};
  const spec::DraftProposal d = Grow(o, nullptr);
  const std::vector<float> root = Row(999);
  std::vector<int32_t> children;
  for (size_t j = 0; j < d.tokens.size(); ++j) {
    if (d.parents[j] == -1) children.push_back(d.tokens[j]);
  }
  ASSERT_FALSE(children.empty());
  for (size_t c = 0; c < children.size(); ++c) {
    int32_t better = 0;  // tokens strictly more probable than this child
    for (int32_t t = 0; t < kVocab; ++t) better += root[t] > root[children[c]];
    EXPECT_EQ(better, static_cast<int32_t>(c)) << "child " << c;
  }
}

TEST(TreeGrowthTest, SampledSiblingsAreDrawnWithoutReplacementAndCarryTheirRows) {
  const TreeGrowthOptions o{3, 3, 9, true};
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    engine::Rng rng(seed);
    const spec::DraftProposal d = Grow(o, &rng);
    ExpectWellFormed(d, o);
    const size_t n = d.tokens.size();
    ASSERT_EQ(d.probs.size(), n * kVocab);
    // Each node's row is its parent's q without the earlier siblings' tokens, renormalised.
    for (size_t j = 0; j < n; ++j) {
      const std::vector<float> q = Row(d.parents[j] < 0 ? 999 : static_cast<uint64_t>(d.tokens[d.parents[j]]) * 31 + d.parents[j]);
      std::set<int32_t> earlier;
      for (size_t i = 0; i < j; ++i) {
        if (d.parents[i] == d.parents[j]) earlier.insert(d.tokens[i]);
      }
      double kept = 0;
      for (int32_t t = 0; t < kVocab; ++t) kept += earlier.count(t) ? 0.0 : q[t];
      for (int32_t t = 0; t < kVocab; ++t) {
        const double want = earlier.count(t) ? 0.0 : q[t] / kept;
        EXPECT_NEAR(d.probs[j * kVocab + t], want, 1e-6) << "seed " << seed << " node " << j << " token " << t;
      }
      EXPECT_GT(d.probs[j * kVocab + d.tokens[j]], 0.0f);
      EXPECT_FLOAT_EQ(d.scores[j], q[d.tokens[j]]);
    }
  }
}

TEST(TreeGrowthTest, SampledChildCountsDoNotDependOnTheDraws) {
  // How many children each expanded node gets is fixed before drawing them, so every seed
  // grows the same number of nodes per depth.
  const TreeGrowthOptions o{4, 3, 14, true};
  std::vector<int32_t> first_per_depth;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    engine::Rng rng(seed);
    const spec::DraftProposal d = Grow(o, &rng);
    std::vector<int32_t> depth(d.tokens.size()), per_depth(o.depth + 1, 0);
    for (size_t j = 0; j < d.tokens.size(); ++j) {
      depth[j] = d.parents[j] < 0 ? 1 : depth[d.parents[j]] + 1;
      ++per_depth[depth[j]];
    }
    if (first_per_depth.empty()) first_per_depth = per_depth;
    EXPECT_EQ(per_depth, first_per_depth) << "seed " << seed;
  }
}

TEST(TreeGrowthTest, FewerChildrenWhenTheDistributionHasFewerTokens) {
  TreeGrowth growth(TreeGrowthOptions{2, 4, 8, true});
  std::vector<float> two(kVocab, 0.0f);
  two[3] = 0.25f;
  two[7] = 0.75f;
  engine::Rng rng(5);
  growth.AddChildren({two}, &rng);
  EXPECT_EQ(growth.size(), 2);
  const spec::DraftProposal d = growth.Proposal();
  EXPECT_EQ(std::set<int32_t>(d.tokens.begin(), d.tokens.end()), (std::set<int32_t>{3, 7}));
  // The second draw had a single token left: its row is one-hot there.
  EXPECT_FLOAT_EQ(d.probs[kVocab + d.tokens[1]], 1.0f);
}

TEST(TreeGrowthTest, StopKeepsTheNodesSoFar) {
  TreeGrowth growth(TreeGrowthOptions{4, 2, 8, false});
  growth.AddChildren({Row(1)}, nullptr);
  ASSERT_FALSE(growth.Expanding().empty());
  growth.Stop();
  EXPECT_TRUE(growth.Expanding().empty());
  EXPECT_EQ(growth.Proposal().tokens.size(), 2u);
}

}  // namespace
}  // namespace splitspec::drafter
