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

// Adds `weight` pseudo-observations of the prior line at each grid point (see online_fit.h).
void AppendPrior(const ForwardCoefficients& prior, double weight, std::vector<ForwardSample>* samples) {
  const int copies = static_cast<int>(std::lround(weight));
  for (double context : {128.0, 1024.0}) {
    for (double batched : {1.0, 4.0, 16.0}) {
      const double seconds = prior.Predict(context, batched);
      if (!(seconds > 0) || !std::isfinite(seconds)) continue;
      for (int i = 0; i < copies; ++i) samples->push_back({context, batched, seconds});
    }
  }
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
  std::vector<ForwardSample> prior;
  if (prior_.has_value()) AppendPrior(*prior_, options_.prior_weight, &prior);
  std::vector<ForwardSample> all = ring_;
  all.insert(all.end(), prior.begin(), prior.end());
  absl::StatusOr<ForwardFit> first = FitForward(all);
  if (!first.ok()) return;  // singular window: keep what we had
  std::vector<double> residuals;
  std::vector<double> seconds;
  residuals.reserve(ring_.size());
  for (const ForwardSample& s : ring_) {
    residuals.push_back(std::abs(first->coefficients.Predict(s.n_context, s.n_batched) - s.seconds));
    seconds.push_back(s.seconds);
  }
  const double spread = 1.4826 * Median(residuals) + 0.01 * Median(seconds);
  // Outliers are judged among the observed steps only; the prior's points always stay.
  std::vector<ForwardSample> kept;
  kept.reserve(all.size());
  for (size_t i = 0; i < ring_.size(); ++i) {
    if (residuals[i] <= options_.outlier_mads * spread) kept.push_back(ring_[i]);
  }
  const size_t dropped = ring_.size() - kept.size();
  kept.insert(kept.end(), prior.begin(), prior.end());
  absl::StatusOr<ForwardFit> fit = dropped == 0 ? first : FitForward(kept);
  if (!fit.ok() || !Usable(*fit)) return;
  outliers_dropped_last_ = static_cast<int64_t>(dropped);
  current_ = *fit;
  ++refits_;
}

nlohmann::json OnlineForwardFit::Describe() const {
  nlohmann::json out = {{"observations", observations_},
                        {"window", options_.window},
                        {"refits", refits_},
                        {"outliers_dropped_last", outliers_dropped_last_}};
  if (prior_.has_value()) {
    out["prior"] = {{"alpha", prior_->alpha}, {"gamma", prior_->gamma}, {"delta", prior_->delta},
                    {"weight", options_.prior_weight}};
  }
  if (current_.has_value()) {
    out["alpha"] = current_->coefficients.alpha;
    out["gamma"] = current_->coefficients.gamma;
    out["delta"] = current_->coefficients.delta;
    out["r2"] = current_->r2;
  }
  return out;
}

}  // namespace splitspec::router
