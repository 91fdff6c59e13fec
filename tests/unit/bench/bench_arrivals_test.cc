// The Poisson arrival process of `splitspec bench` and the parsing of its load-level lists.
#include "tools/bench_arrivals.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::tools::bench {
namespace {

TEST(PoissonArrivalsTest, GapsAreExponentialWithMeanAndVarianceOfTheRate) {
  constexpr double kRate = 4.0;
  constexpr int kN = 200000;
  PoissonArrivals arrivals(kRate, /*seed=*/7);
  double sum = 0, sum_sq = 0;
  double min_gap = std::numeric_limits<double>::infinity();
  for (int i = 0; i < kN; ++i) {
    const double gap = arrivals.NextGapSeconds();
    sum += gap;
    sum_sq += gap * gap;
    min_gap = std::min(min_gap, gap);
  }
  const double mean = sum / kN;
  const double variance = sum_sq / kN - mean * mean;
  // Exponential(rate): mean 1/rate, variance 1/rate^2. Tolerances are 5 standard errors:
  // sd(mean) = (1/rate)/sqrt(n); sd(variance) ~ sqrt(8/n)/rate^2 (fourth central moment 9/rate^4).
  EXPECT_NEAR(mean, 1 / kRate, 5 * (1 / kRate) / std::sqrt(kN));
  EXPECT_NEAR(variance, 1 / (kRate * kRate), 5 * std::sqrt(8.0 / kN) / (kRate * kRate));
  EXPECT_GE(min_gap, 0.0);
}

TEST(PoissonArrivalsTest, CountsPerWindowArePoisson) {
  // Arrivals in unit windows of a Poisson process: mean = variance = rate (a regular or bursty
  // process would have a variance below or above its mean).
  constexpr double kRate = 5.0;
  constexpr int kWindows = 20000;
  const std::vector<double> times =
      ArrivalSchedule(kRate, kWindows, /*seed=*/11, /*max_requests=*/1 << 30);
  std::vector<int> counts(kWindows, 0);
  for (double t : times) ++counts[static_cast<size_t>(t)];
  double sum = 0, sum_sq = 0;
  for (int c : counts) {
    sum += c;
    sum_sq += static_cast<double>(c) * c;
  }
  const double mean = sum / kWindows;
  const double variance = sum_sq / kWindows - mean * mean;
  EXPECT_NEAR(mean, kRate, 5 * std::sqrt(kRate / kWindows));
  // sd(sample variance) ~ sqrt((mu4 - sigma^4) / n), mu4 = rate (1 + 3 rate) for Poisson.
  EXPECT_NEAR(variance, kRate, 5 * std::sqrt((kRate * (1 + 3 * kRate) - kRate * kRate) / kWindows));
}

TEST(PoissonArrivalsTest, SameSeedRepeatsDifferentSeedDiffers) {
  const std::vector<double> a = ArrivalSchedule(2.0, 50, 3, 1000);
  const std::vector<double> b = ArrivalSchedule(2.0, 50, 3, 1000);
  const std::vector<double> c = ArrivalSchedule(2.0, 50, 4, 1000);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(ArrivalScheduleTest, AscendingInsideTheWindowAndCapped) {
  const std::vector<double> times = ArrivalSchedule(10.0, 30, 1, 100000);
  ASSERT_GT(times.size(), 200u);  // ~300 expected; 200 is > 5 sd below
  for (size_t i = 0; i < times.size(); ++i) {
    EXPECT_GE(times[i], 0.0);
    EXPECT_LT(times[i], 30.0);
    if (i > 0) {
      EXPECT_GE(times[i], times[i - 1]);
    }
  }
  EXPECT_EQ(ArrivalSchedule(10.0, 30, 1, 17).size(), 17u);
}

TEST(ArrivalScheduleTest, InfiniteRateSendsEverythingAtOnceUpToTheCap) {
  const std::vector<double> times =
      ArrivalSchedule(std::numeric_limits<double>::infinity(), 10, 1, 25);
  ASSERT_EQ(times.size(), 25u);
  for (double t : times) EXPECT_EQ(t, 0.0);
}

TEST(ParseRatesTest, AcceptsNumbersAndInf) {
  auto rates = ParseRates("0.5, 1,2,inf");
  ASSERT_TRUE(rates.ok()) << rates.status();
  ASSERT_EQ(rates->size(), 4u);
  EXPECT_EQ((*rates)[0], 0.5);
  EXPECT_EQ((*rates)[2], 2.0);
  EXPECT_TRUE(std::isinf((*rates)[3]));
}

TEST(ParseRatesTest, RejectsNonPositiveAndGarbage) {
  for (const char* bad : {"0", "-1", "abc", "", "1,,2", "nan", "2x"}) {
    EXPECT_FALSE(ParseRates(bad).ok()) << bad;
  }
}

TEST(ParseConcurrenciesTest, BoundsAndGarbage) {
  auto values = ParseConcurrencies("1,4,8", 16);
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(*values, (std::vector<int>{1, 4, 8}));
  for (const char* bad : {"0", "17", "1.5", "", "a"})
    EXPECT_FALSE(ParseConcurrencies(bad, 16).ok()) << bad;
}

}  // namespace
}  // namespace splitspec::tools::bench
