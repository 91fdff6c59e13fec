// OnlineForwardFit: the target's latency coefficients T = alpha * n_context + gamma * n_batched
// + delta refitted from the steps the router observes, so a profiled latency file is only the
// starting point and a machine that is slower, faster or shaped differently is followed.
//
// Windowed least squares: the last `window` observations (bounded memory), refitted every
// `refit_every` new ones with FitForward (router/latency_model.h). Robust to outliers: after a
// first fit, observations whose residual exceeds `outlier_mads` robust standard deviations
// (1.4826 x the median absolute residual, plus a floor of 1% of the median step) are dropped
// and the fit is redone, so one stalled step (a page fault, a preempted process) does not move
// the coefficients. A fit is adopted only when it is well defined: the design is not singular
// (contexts and batch sizes both varied in the window) and no coefficient is negative; until
// then current() is empty and the caller keeps its file coefficients.
//
// A prior (SetPrior) anchors what the window cannot pin down. At one client a policy that
// settles on one proposal length feeds the target the same number of tokens step after step:
// the window then says little about gamma against delta, a noisy step or two can tilt the line
// (a steep gamma makes every draft look dear), and once the policy stops drafting the window
// holds only 1-token steps, is singular, and the tilted fit stays for good. With a prior, each
// refit also sees `prior_weight` pseudo-observations of the prior line at every point of a
// fixed grid (contexts 128 and 1024 x 1, 4 and 16 batched tokens): where the window varies
// batch sizes and contexts its hundreds of steps outweigh them, and where it does not, the fit
// follows the prior's shape at the window's level.
//
// Thread-safety: thread-compatible (the router's loop thread).
#ifndef SPLITSPEC_ROUTER_ONLINE_FIT_H_
#define SPLITSPEC_ROUTER_ONLINE_FIT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "nlohmann/json.hpp"
#include "router/latency_model.h"

namespace splitspec::router {

struct OnlineFitOptions {
  int32_t window = 512;
  int32_t refit_every = 32;
  double outlier_mads = 4.0;
  double prior_weight = 2.0;  // pseudo-observations per grid point of the prior
};

class OnlineForwardFit {
 public:
  explicit OnlineForwardFit(OnlineFitOptions options = {});

  void Observe(double n_context, double n_batched, double seconds);
  // The line refits fall back on (the router passes its profiled coefficients scaled to the
  // observed level); unset, refits use the window alone.
  void SetPrior(const ForwardCoefficients& prior) { prior_ = prior; }
  const std::optional<ForwardFit>& current() const { return current_; }

  int64_t observations() const { return observations_; }
  int64_t refits() const { return refits_; }
  int64_t outliers_dropped_last() const { return outliers_dropped_last_; }
  nlohmann::json Describe() const;

 private:
  void Refit();

  OnlineFitOptions options_;
  std::vector<ForwardSample> ring_;  // the window, oldest overwritten first
  size_t next_ = 0;
  int64_t observations_ = 0;
  int64_t since_refit_ = 0;
  int64_t refits_ = 0;
  int64_t outliers_dropped_last_ = 0;
  std::optional<ForwardFit> current_;
  std::optional<ForwardCoefficients> prior_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_ONLINE_FIT_H_
