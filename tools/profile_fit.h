// The latency-model fit of `splitspec profile`: least squares of
//   T_fwd = alpha * N_context + gamma * N_batched + delta
// (router/latency_model.h FitForward), constrained to non-negative coefficients (the router
// refuses negative ones) and robust to samples a stall inflated.
#ifndef SPLITSPEC_TOOLS_PROFILE_FIT_H_
#define SPLITSPEC_TOOLS_PROFILE_FIT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "router/latency_model.h"

namespace splitspec::tools {

// FitForward, or when it yields a negative coefficient (noise on a term too small to
// measure) the best fit with every coefficient >= 0: the least-squares fits over the subsets
// of terms, which is exact non-negative least squares for three terms. R^2 and the worst
// relative error are those of the returned fit; `constrained` says whether the refit ran.
absl::StatusOr<router::ForwardFit> FitNonNegative(absl::Span<const router::ForwardSample> samples,
                                                  bool* constrained);

// A sample the fit misses by more than this relative error is an interference outlier
// candidate (see FitRobust).
inline constexpr double kOutlierRelativeError = 0.5;

// FitNonNegative after trimming interference outliers: while the fit misses some sample by
// more than kOutlierRelativeError, the sample with the largest absolute residual (a stall
// inflates a time by orders of magnitude, so it is the one that pulls the fit most) is set
// aside and the fit redone, at most a quarter of the samples. `discarded` counts them.
absl::StatusOr<router::ForwardFit> FitRobust(std::vector<router::ForwardSample> samples, bool* constrained,
                                             size_t* discarded);

// The batch shape the line misses (router/latency_model.h, target.batch_factors): per fed-token
// count in the samples, the median of observed / fitted time over its samples (a median, so
// a stalled sample does not set a size's factor), then adjusted so that the times they imply
// at the samples' mean context never fall as the count grows (neighbouring sizes that
// disagree are pooled at their mean).
std::map<int32_t, double> BatchFactors(absl::Span<const router::ForwardSample> samples,
                                       const router::ForwardCoefficients& fit);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_PROFILE_FIT_H_
