// Expected step length: closed forms vs explicit sums and Monte Carlo.
#include "router/expected_length.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::router {
namespace {

TEST(ExpectedLengthTest, ChainClosedFormEqualsSumOfPowers) {
  for (double a : {0.0, 0.1, 0.5, 0.7, 0.95, 0.9995, 1.0}) {
    for (int k = 0; k <= 10; ++k) {
      double sum = 0;
      for (int i = 0; i <= k; ++i) sum += std::pow(a, i);
      EXPECT_NEAR(ExpectedChainLength(a, k), sum, 1e-9) << "a=" << a << " k=" << k;
    }
  }
  EXPECT_DOUBLE_EQ(ExpectedChainLength(1.0, 4), 5.0);  // the a -> 1 limit is k + 1
  EXPECT_DOUBLE_EQ(ExpectedChainLength(0.0, 4), 1.0);  // only the target's own token
  EXPECT_DOUBLE_EQ(ExpectedChainLength(0.5, -3), 1.0);
}

TEST(ExpectedLengthTest, ChainIsConcaveInK) {
  for (double a : {0.2, 0.6, 0.9}) {
    for (int k = 0; k < 8; ++k) {
      const double d1 = ExpectedChainLength(a, k + 1) - ExpectedChainLength(a, k);
      const double d2 = ExpectedChainLength(a, k + 2) - ExpectedChainLength(a, k + 1);
      EXPECT_GE(d1, d2 - 1e-12);
      EXPECT_NEAR(d1, ChainMarginalGain(a, k), 1e-12);
    }
  }
}

TEST(ExpectedLengthTest, ChainMatchesMonteCarlo) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  for (double a : {0.3, 0.7, 0.9}) {
    const int k = 5, n = 200000;
    double total = 0;
    for (int t = 0; t < n; ++t) {
      int accepted = 0;
      while (accepted < k && u(rng) < a) ++accepted;
      total += accepted + 1;
    }
    // Standard error of the mean is below 0.005 here; allow 4 of them.
    EXPECT_NEAR(total / n, ExpectedChainLength(a, k), 0.02) << "a=" << a;
  }
}

TEST(ExpectedLengthTest, TreeFormsAgreeAndReduceToTheChain) {
  const std::vector<double> a = {0.6, 0.5, 0.4};
  const std::vector<int32_t> k = {3, 2, 2};
  EXPECT_NEAR(ExpectedTreeLength(a, k), ExpectedTreeLengthByOutcome(a, k), 1e-12);
  // One candidate per depth with equal rates is a chain.
  const std::vector<double> same(4, 0.7);
  const std::vector<int32_t> ones(4, 1);
  EXPECT_NEAR(ExpectedTreeLength(same, ones), ExpectedChainLength(0.7, 4), 1e-12);
  EXPECT_NEAR(ExpectedTreeLengthByOutcome(same, ones), ExpectedChainLength(0.7, 4), 1e-12);
}

TEST(ExpectedLengthTest, TreeMatchesMonteCarlo) {
  // Simulate the full tree: at each depth every candidate under the accepted node is accepted
  // independently; the path continues while at least one is.
  const std::vector<double> a = {0.5, 0.4, 0.3};
  const std::vector<int32_t> k = {3, 2, 3};
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  const int n = 200000;
  double total = 0;
  for (int t = 0; t < n; ++t) {
    int depth = 0;
    for (size_t j = 0; j < a.size(); ++j) {
      bool any = false;
      for (int c = 0; c < k[j]; ++c) any |= u(rng) < a[j];
      if (!any) break;
      ++depth;
    }
    total += depth + 1;
  }
  EXPECT_NEAR(total / n, ExpectedTreeLength(a, k), 0.02);
}

TEST(ExpectedLengthTest, TreeVerifiedTokensCountsTheFullTree) {
  // The SmartSpec example: 3, 2 and 2 candidates -> 3 + 3*2 + 3*2*2 = 21 tokens.
  EXPECT_EQ(TreeVerifiedTokens(std::vector<int32_t>{3, 2, 2}), 21);
  EXPECT_EQ(TreeVerifiedTokens(std::vector<int32_t>{1, 1, 1, 1}), 4);
  EXPECT_EQ(TreeVerifiedTokens(std::vector<int32_t>{}), 0);
}

}  // namespace
}  // namespace splitspec::router
