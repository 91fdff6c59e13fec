// Non-negative, outlier-robust latency-model fits (see profile_fit.h).
#include "tools/profile_fit.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

namespace splitspec::tools {
namespace {

// Least squares over a subset of the columns {n_context, n_batched, 1} (the others fixed at
// 0) by the normal equations; false when singular or when a fitted coefficient is negative.
bool FitSubset(absl::Span<const router::ForwardSample> samples, const bool use[3], double coef[3]) {
  int cols[3], m = 0;
  for (int c = 0; c < 3; ++c) {
    if (use[c]) cols[m++] = c;
  }
  auto feature = [](const router::ForwardSample& x, int c) {
    return c == 0 ? x.n_context : c == 1 ? x.n_batched : 1.0;
  };
  double a[3][4] = {};
  for (const router::ForwardSample& x : samples) {
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < m; ++j) a[i][j] += feature(x, cols[i]) * feature(x, cols[j]);
      a[i][3] += feature(x, cols[i]) * x.seconds;
    }
  }
  // Gauss-Jordan with partial pivoting on the m x m system (augmented in column 3).
  for (int i = 0; i < m; ++i) {
    int pivot = i;
    for (int r = i + 1; r < m; ++r) {
      if (std::fabs(a[r][i]) > std::fabs(a[pivot][i])) pivot = r;
    }
    if (!(std::fabs(a[pivot][i]) > 1e-300)) return false;
    for (int c = 0; c < 4; ++c) std::swap(a[i][c], a[pivot][c]);
    for (int r = 0; r < m; ++r) {
      if (r == i) continue;
      const double f = a[r][i] / a[i][i];
      for (int c = i; c < 4; ++c) a[r][c] -= f * a[i][c];
    }
  }
  coef[0] = coef[1] = coef[2] = 0;
  for (int i = 0; i < m; ++i) {
    coef[cols[i]] = a[i][3] / a[i][i];
    if (!(coef[cols[i]] >= 0) || !std::isfinite(coef[cols[i]])) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<router::ForwardFit> FitNonNegative(absl::Span<const router::ForwardSample> samples,
                                                  bool* constrained) {
  *constrained = false;
  absl::StatusOr<router::ForwardFit> fit = router::FitForward(samples);
  if (!fit.ok()) return fit;
  const router::ForwardCoefficients& c = fit->coefficients;
  if (c.alpha >= 0 && c.gamma >= 0 && c.delta >= 0) return fit;
  *constrained = true;
  double mean = 0;
  for (const router::ForwardSample& x : samples) mean += x.seconds;
  mean /= static_cast<double>(samples.size());
  double best_sse = -1;
  router::ForwardFit best;
  for (int mask = 1; mask < 8; ++mask) {
    const bool use[3] = {(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
    double coef[3];
    if (!FitSubset(samples, use, coef)) continue;
    router::ForwardFit candidate;
    candidate.coefficients = {coef[0], coef[1], coef[2]};
    double sse = 0, sst = 0, worst = 0;
    for (const router::ForwardSample& x : samples) {
      const double predicted = candidate.coefficients.Predict(x.n_context, x.n_batched);
      sse += (predicted - x.seconds) * (predicted - x.seconds);
      sst += (x.seconds - mean) * (x.seconds - mean);
      if (x.seconds > 0) worst = std::max(worst, std::fabs(predicted - x.seconds) / x.seconds);
    }
    candidate.r2 = sst > 0 ? 1.0 - sse / sst : 1.0;
    candidate.worst_relative_error = worst;
    if (best_sse < 0 || sse < best_sse) {
      best_sse = sse;
      best = candidate;
    }
  }
  if (best_sse < 0) return absl::FailedPreconditionError("no non-negative fit exists for these samples");
  return best;
}

absl::StatusOr<router::ForwardFit> FitRobust(std::vector<router::ForwardSample> samples, bool* constrained,
                                             size_t* discarded) {
  *discarded = 0;
  const size_t max_discarded = samples.size() / 4;
  while (true) {
    absl::StatusOr<router::ForwardFit> fit = FitNonNegative(samples, constrained);
    if (!fit.ok() || fit->worst_relative_error <= kOutlierRelativeError || *discarded >= max_discarded ||
        samples.size() <= 4) {
      return fit;
    }
    size_t worst = 0;
    double worst_residual = -1;
    for (size_t i = 0; i < samples.size(); ++i) {
      const double residual = std::fabs(fit->coefficients.Predict(samples[i].n_context, samples[i].n_batched) -
                                        samples[i].seconds);
      if (residual > worst_residual) {
        worst_residual = residual;
        worst = i;
      }
    }
    samples.erase(samples.begin() + static_cast<std::ptrdiff_t>(worst));
    ++*discarded;
  }
}

std::map<int32_t, double> BatchFactors(absl::Span<const router::ForwardSample> samples,
                                       const router::ForwardCoefficients& fit) {
  std::map<int32_t, std::vector<double>> ratios;
  for (const router::ForwardSample& x : samples) {
    const double predicted = fit.Predict(x.n_context, x.n_batched);
    if (!(predicted > 0) || !(x.seconds > 0) || !(x.n_batched >= 1)) continue;
    ratios[static_cast<int32_t>(std::lround(x.n_batched))].push_back(x.seconds / predicted);
  }
  // Per size, the median ratio and the time it implies at the samples' mean context.
  double mean_context = 0;
  for (const router::ForwardSample& x : samples) mean_context += x.n_context;
  mean_context /= std::max<double>(1.0, static_cast<double>(samples.size()));
  std::vector<int32_t> sizes;
  std::vector<double> times;
  for (auto& [n, r] : ratios) {
    const size_t mid = r.size() / 2;
    std::nth_element(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(mid), r.end());
    double median = r[mid];
    if (r.size() % 2 == 0) {
      median = 0.5 * (median + *std::max_element(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(mid)));
    }
    sizes.push_back(n);
    times.push_back(median * fit.Predict(mean_context, n));
  }
  // A forward of more tokens never costs less: the implied times are made non-decreasing by
  // pooling adjacent violators (each pool at its mean), so noise between neighbouring sizes
  // does not price a longer chain below a shorter one.
  std::vector<double> pool_sum, pool_count;
  for (double t : times) {
    pool_sum.push_back(t);
    pool_count.push_back(1);
    while (pool_sum.size() > 1 && pool_sum[pool_sum.size() - 2] / pool_count[pool_count.size() - 2] >
                                      pool_sum.back() / pool_count.back()) {
      pool_sum[pool_sum.size() - 2] += pool_sum.back();
      pool_count[pool_count.size() - 2] += pool_count.back();
      pool_sum.pop_back();
      pool_count.pop_back();
    }
  }
  std::map<int32_t, double> factors;
  size_t at = 0;
  for (size_t p = 0; p < pool_sum.size(); ++p) {
    const double t = pool_sum[p] / pool_count[p];
    for (int c = 0; c < static_cast<int>(pool_count[p]); ++c, ++at) {
      factors[sizes[at]] = t / fit.Predict(mean_context, sizes[at]);
    }
  }
  return factors;
}

}  // namespace splitspec::tools
