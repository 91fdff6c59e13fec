// Test helper: Pearson's chi-square goodness-of-fit p-value, used by the sampling and
// rejection-sampling distribution tests (header-only; tests/unit/spec includes it too).
#ifndef SPLITSPEC_TESTS_UNIT_SAMPLING_CHI_SQUARE_H_
#define SPLITSPEC_TESTS_UNIT_SAMPLING_CHI_SQUARE_H_

#include <cmath>
#include <cstdint>
#include <vector>

namespace splitspec::testing {

// Upper regularised incomplete gamma Q(a, x) = Gamma(a, x) / Gamma(a): a power series below
// x = a + 1 and a continued fraction (modified Lentz) above, both to double precision.
inline double UpperRegularizedGamma(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double log_prefactor = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1.0) {
    double term = 1.0 / a;
    double sum = term;
    for (int n = 1; n < 10000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-16) break;
    }
    return 1.0 - sum * std::exp(log_prefactor);
  }
  constexpr double kTiny = 1e-300;
  double b = x + 1.0 - a;
  double c = 1.0 / kTiny;
  double d = 1.0 / b;
  double h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(log_prefactor) * h;
}

// P(X >= statistic) for X ~ chi-square with `df` degrees of freedom.
inline double ChiSquareSurvival(double statistic, int df) {
  return UpperRegularizedGamma(0.5 * df, 0.5 * statistic);
}

// p-value of observing `counts` when each draw is `expected[i]` (sums to 1). Bins whose
// expected count is below 5 are pooled so the chi-square approximation holds. A draw in a
// bin of expected probability 0 is impossible under the hypothesis: p-value 0.
inline double ChiSquarePValue(const std::vector<int64_t>& counts,
                              const std::vector<double>& expected) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  double statistic = 0.0;
  int n_bins = 0;
  double pooled_expected = 0.0;
  int64_t pooled_count = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * static_cast<double>(n);
    if (expected[i] <= 0.0) {
      if (counts[i] != 0) return 0.0;
      continue;
    }
    if (e < 5.0) {
      pooled_expected += e;
      pooled_count += counts[i];
      continue;
    }
    const double diff = static_cast<double>(counts[i]) - e;
    statistic += diff * diff / e;
    ++n_bins;
  }
  if (pooled_expected > 0.0) {
    const double diff = static_cast<double>(pooled_count) - pooled_expected;
    statistic += diff * diff / pooled_expected;
    ++n_bins;
  }
  if (n_bins <= 1) return 1.0;  // one bin: every sample lands there, nothing to test
  return ChiSquareSurvival(statistic, n_bins - 1);
}

// The threshold the distribution tests reject at: small enough that a correct sampler with a
// fixed seed does not fail by chance, while biased samplers over 10^5 draws score far below.
inline constexpr double kChiSquareMinPValue = 1e-6;

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_UNIT_SAMPLING_CHI_SQUARE_H_
