// FitNonNegative and FitRobust: exact samples give the exact coefficients back, a term whose
// unconstrained fit goes negative is refit at zero, and a stall-inflated sample is set aside.
#include "tools/profile_fit.h"

#include <algorithm>
#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::tools {
namespace {

using router::ForwardSample;

// T = alpha * context + gamma * batched + delta over a small grid.
std::vector<ForwardSample> Exact(double alpha, double gamma, double delta) {
  std::vector<ForwardSample> samples;
  for (double context : {32.0, 128.0, 384.0, 1024.0}) {
    for (double batched : {1.0, 2.0, 4.0, 8.0, 16.0}) {
      samples.push_back({context * batched / 4, batched, alpha * context * batched / 4 + gamma * batched + delta});
    }
  }
  return samples;
}

TEST(ProfileFitTest, ExactSamplesGiveTheirCoefficients) {
  bool constrained = true;
  auto fit = FitNonNegative(Exact(2e-7, 3e-5, 1e-3), &constrained);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_FALSE(constrained);
  EXPECT_NEAR(fit->coefficients.alpha, 2e-7, 1e-12);
  EXPECT_NEAR(fit->coefficients.gamma, 3e-5, 1e-10);
  EXPECT_NEAR(fit->coefficients.delta, 1e-3, 1e-9);
  EXPECT_NEAR(fit->r2, 1.0, 1e-9);
}

TEST(ProfileFitTest, NegativeTermIsRefitAtZero) {
  // No per-token cost, and a per-context cost slightly below zero in the data: the router
  // refuses negative coefficients, so the fit must drop the term rather than return it.
  std::vector<ForwardSample> samples = Exact(0, 4e-5, 2e-3);
  for (ForwardSample& x : samples) x.seconds -= 1e-9 * x.n_context;
  bool constrained = false;
  auto fit = FitNonNegative(samples, &constrained);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_TRUE(constrained);
  EXPECT_GE(fit->coefficients.alpha, 0.0);
  EXPECT_GE(fit->coefficients.gamma, 0.0);
  EXPECT_GE(fit->coefficients.delta, 0.0);
  EXPECT_GT(fit->r2, 0.99);
}

TEST(ProfileFitTest, StallInflatedSampleIsSetAside) {
  std::vector<ForwardSample> samples = Exact(1e-7, 2e-5, 5e-4);
  samples[7].seconds *= 100;  // another process held the core
  bool constrained = false;
  size_t discarded = 0;
  auto fit = FitRobust(samples, &constrained, &discarded);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(discarded, 1u);
  EXPECT_NEAR(fit->coefficients.alpha, 1e-7, 1e-12);
  EXPECT_NEAR(fit->coefficients.gamma, 2e-5, 1e-10);
  EXPECT_LE(fit->worst_relative_error, kOutlierRelativeError);
}

TEST(ProfileFitTest, AtMostAQuarterOfTheSamplesIsSetAside) {
  std::vector<ForwardSample> samples = Exact(1e-7, 2e-5, 5e-4);
  for (size_t i = 0; i < samples.size(); i += 2) samples[i].seconds *= 1 + static_cast<double>(i);
  bool constrained = false;
  size_t discarded = 0;
  auto fit = FitRobust(samples, &constrained, &discarded);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_LE(discarded, samples.size() / 4);
}

// A forward bound by weight reads costs the same for 1 to 4 tokens and then rises: the line
// cannot follow that, the batch factors put it back (times at the samples' mean context).
TEST(ProfileFitTest, BatchFactorsGiveBackAFlatThenRisingForward) {
  auto forward = [](double n) { return std::max(0.006, 0.0015 * n); };  // flat to 4, then 1.5 ms/token
  std::vector<ForwardSample> samples;
  for (double n : {1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0}) {
    for (double context : {100.0, 200.0, 300.0}) samples.push_back({context, n, forward(n)});
  }
  samples.push_back({200, 2.0, 0.5});  // one stalled sample: the median ignores it
  bool constrained = false;
  size_t discarded = 0;
  auto fit = FitRobust(samples, &constrained, &discarded);
  ASSERT_TRUE(fit.ok());
  const std::map<int32_t, double> factors = BatchFactors(samples, fit->coefficients);
  ASSERT_EQ(factors.size(), 7u);
  // At the samples' mean context (200), within what the fit's context term moves the median.
  for (const auto& [n, f] : factors) {
    EXPECT_NEAR(f * fit->coefficients.Predict(200, n), forward(n), 0.02 * forward(n)) << n;
  }
}

// Neighbouring sizes whose measured times disagree with their order are pooled at their mean:
// the implied times never fall as the token count grows.
TEST(ProfileFitTest, BatchFactorsNeverPriceMoreTokensCheaper) {
  const router::ForwardCoefficients line{0, 0.001, 0.004};
  std::vector<ForwardSample> samples = {{0, 1, 0.0050}, {0, 2, 0.0070}, {0, 3, 0.0060}, {0, 4, 0.0080}};
  const std::map<int32_t, double> factors = BatchFactors(samples, line);
  double previous = 0;
  for (const auto& [n, f] : factors) {
    const double t = f * line.Predict(0, n);
    EXPECT_GE(t, previous - 1e-12) << n;
    previous = t;
  }
  EXPECT_NEAR(factors.at(2) * line.Predict(0, 2), 0.0065, 1e-12);
  EXPECT_NEAR(factors.at(3) * line.Predict(0, 3), 0.0065, 1e-12);
  EXPECT_NEAR(factors.at(1) * line.Predict(0, 1), 0.0050, 1e-12);
  EXPECT_NEAR(factors.at(4) * line.Predict(0, 4), 0.0080, 1e-12);
}

}  // namespace
}  // namespace splitspec::tools
