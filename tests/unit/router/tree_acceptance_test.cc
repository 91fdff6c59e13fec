// TreeAcceptance: per-depth estimates start from the chain-acceptance prior, move to what tree
// outcomes show (successes at the accepted depths, a failure below only when the tree went
// on), and give the expected length 1 + sum of the products of the depths' estimates.
#include "router/tree_acceptance.h"

#include <gtest/gtest.h>

#include <cmath>

namespace splitspec::router {
namespace {

TEST(TreeAcceptanceTest, PriorIsWidthIndependentCandidates) {
  TreeAcceptance t;
  const std::vector<double> p = t.DepthAcceptance("pool", /*depth=*/3, /*nodes=*/9, /*chain_acceptance=*/0.5);
  ASSERT_EQ(p.size(), 3u);
  for (double x : p) EXPECT_NEAR(x, 1.0 - std::pow(0.5, 3), 1e-12);  // width 3
  EXPECT_NEAR(t.ExpectedLength("pool", 3, 9, 0.5), 1 + 0.875 + 0.875 * 0.875 + std::pow(0.875, 3), 1e-12);
}

TEST(TreeAcceptanceTest, ConvergesToTheObservedPerDepthRates) {
  TreeAcceptance t(/*decay=*/0.999, /*prior_weight=*/4);
  // Depth 1 always accepted; depth 2 accepted one time in four; the tree always continues.
  for (int i = 0; i < 4000; ++i) t.Observe("pool", 3, 9, i % 4 == 0 ? 2 : 1, /*path_continued=*/true);
  const std::vector<double> p = t.DepthAcceptance("pool", 3, 9, 0.5);
  EXPECT_NEAR(p[0], TreeAcceptance::kCap, 1e-3);
  EXPECT_NEAR(p[1], 0.25, 0.02);
  // Depth 3 saw failures only (1000 of them, when depth 2 was accepted).
  EXPECT_LT(p[2], 0.05);
  // Other pools and widths keep their priors.
  EXPECT_NEAR(t.DepthAcceptance("other", 3, 9, 0.5)[1], 0.875, 1e-12);
  EXPECT_NEAR(t.DepthAcceptance("pool", 3, 6, 0.5)[1], 0.75, 1e-12);
}

// A tree whose accepted node at depth 1 has children only half the time reaches depth 2 half
// as often as its per-depth acceptance alone says.
TEST(TreeAcceptanceTest, PathsThatRunOutOfTreeShortenTheExpectedLength) {
  TreeAcceptance t(0.999, 4);
  for (int i = 0; i < 4000; ++i) t.Observe("pool", 2, 6, i % 2 == 0 ? 2 : 1, /*path_continued=*/false);
  EXPECT_NEAR(t.Continuation("pool", 2, 6)[0], 0.5, 0.01);
  const std::vector<double> p = t.DepthAcceptance("pool", 2, 6, 0.5);
  EXPECT_NEAR(t.ExpectedLength("pool", 2, 6, 0.5), 1 + p[0] + p[0] * 0.5 * p[1], 0.01);
}

TEST(TreeAcceptanceTest, APathThatRanOutOfTreeIsNoFailure) {
  TreeAcceptance t(0.999, 4);
  for (int i = 0; i < 100; ++i) t.Observe("pool", 2, 6, 1, /*path_continued=*/false);
  // Depth 2 was never tried: it keeps its prior.
  EXPECT_NEAR(t.DepthAcceptance("pool", 2, 6, 0.5)[1], 0.875, 1e-12);
  EXPECT_GT(t.DepthAcceptance("pool", 2, 6, 0.5)[0], 0.95);
}

// A depth-1 tree's accepted node never has children: that is the shape, not the drafter, and
// must not lower the continuation a deeper tree of the same width sees at depth 1.
TEST(TreeAcceptanceTest, TheTreesLastDepthSaysNothingOfContinuation) {
  TreeAcceptance t(0.999, 4);
  for (int i = 0; i < 100; ++i) t.Observe("pool", /*depth=*/1, /*nodes=*/2, 1, /*path_continued=*/false);
  ASSERT_EQ(TreeAcceptance::Width(1, 2), TreeAcceptance::Width(2, 4));
  EXPECT_DOUBLE_EQ(t.Continuation("pool", 2, 4)[0], 1.0);
  EXPECT_GT(t.DepthAcceptance("pool", 2, 4, 0.5)[0], 0.95);
}

// ExpectedLength works in one pass; it must give exactly the documented product of the per-depth
// estimates, for observed and unobserved pools, widths and depths.
TEST(TreeAcceptanceTest, ExpectedLengthIsTheProductOfDepthAcceptanceAndContinuation) {
  TreeAcceptance t;
  for (int round = 0; round < 40; ++round) {
    for (int32_t depth = 1; depth <= 6; ++depth) {
      t.Observe("pool", depth, depth * (2 + round % 3), round % (depth + 2), round % 3 != 0);
      t.Observe("other-pool-with-a-long-name", depth, depth * 2, (round + 1) % (depth + 1), true);
    }
  }
  for (const std::string pool : {"pool", "other-pool-with-a-long-name", "never-seen"}) {
    for (int32_t depth = 1; depth <= 8; ++depth) {
      for (int32_t nodes : {depth, 2 * depth, 3 * depth, 4 * depth, 9 * depth}) {
        for (double a : {0.0, 0.35, 0.8, 1.0}) {
          const std::vector<double> p = t.DepthAcceptance(pool, depth, nodes, a);
          const std::vector<double> c = t.Continuation(pool, depth, nodes);
          double length = 1.0, reach = 1.0;
          for (int32_t d = 1; d <= depth; ++d) {
            reach *= (d == 1 ? 1.0 : c[d - 2]) * p[d - 1];
            length += reach;
          }
          EXPECT_EQ(t.ExpectedLength(pool, depth, nodes, a), length)
              << pool << " depth " << depth << " nodes " << nodes << " acceptance " << a;
        }
      }
    }
  }
  // The observations moved the estimates off the prior (the comparison above is not of priors
  // alone).
  EXPECT_NE(t.ExpectedLength("pool", 3, 6, 0.35), TreeAcceptance().ExpectedLength("pool", 3, 6, 0.35));
}

}  // namespace
}  // namespace splitspec::router
