// OnlineForwardFit (see online_fit.h).
#include "router/online_fit.h"

#include <algorithm>
#include <cmath>

namespace splitspec::router {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

bool Usable(const ForwardFit& fit) {
  const ForwardCoefficients& c = fit.coefficients;
  return std::isfinite(c.alpha) && std::isfinite(c.gamma) && std::isfinite(c.delta) && c.alpha >= 0 &&
         c.gamma >= 0 && c.delta >= 0;
}

}  // namespace

OnlineForwardFit::OnlineForwardFit(OnlineFitOptions options) : options_(options) {
  options_.window = std::max(options_.window, 8);
  options_.refit_every = std::max(options_.refit_every, 1);
  ring_.reserve(static_cast<size_t>(options_.window));
}

void OnlineForwardFit::Observe(double n_context, double n_batched, double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds) || !(n_context >= 0) || !(n_batched > 0)) return;
  const ForwardSample sample{n_context, n_batched, seconds};
  if (static_cast<int32_t>(ring_.size()) < options_.window) {
    ring_.push_back(sample);
  } else {
    ring_[next_] = sample;
    next_ = (next_ + 1) % ring_.size();
  }
  ++observations_;
  if (++since_refit_ >= options_.refit_every) {
    since_refit_ = 0;
    Refit();
  }
}

void OnlineForwardFit::Refit() {
  absl::StatusOr<ForwardFit> first = FitForward(ring_);
  if (!first.ok()) return;  // singular window: keep what we had
  std::vector<double> residuals;
  std::vector<double> seconds;
  residuals.reserve(ring_.size());
  for (const ForwardSample& s : ring_) {
    residuals.push_back(std::abs(first->coefficients.Predict(s.n_context, s.n_batched) - s.seconds));
    seconds.push_back(s.seconds);
  }
  const double spread = 1.4826 * Median(residuals) + 0.01 * Median(seconds);
  std::vector<ForwardSample> kept;
  kept.reserve(ring_.size());
  for (size_t i = 0; i < ring_.size(); ++i) {
    if (residuals[i] <= options_.outlier_mads * spread) kept.push_back(ring_[i]);
  }
  absl::StatusOr<ForwardFit> fit = kept.size() == ring_.size() ? first : FitForward(kept);
  if (!fit.ok() || !Usable(*fit)) return;
  outliers_dropped_last_ = static_cast<int64_t>(ring_.size() - kept.size());
  current_ = *fit;
  ++refits_;
}

nlohmann::json OnlineForwardFit::Describe() const {
  nlohmann::json out = {{"observations", observations_},
                        {"window", options_.window},
                        {"refits", refits_},
                        {"outliers_dropped_last", outliers_dropped_last_}};
  if (current_.has_value()) {
    out["alpha"] = current_->coefficients.alpha;
    out["gamma"] = current_->coefficients.gamma;
    out["delta"] = current_->coefficients.delta;
    out["r2"] = current_->r2;
  }
  return out;
}

}  // namespace splitspec::router
