// VerifySlowdown (see verify_slowdown.h).
#include "router/verify_slowdown.h"

#include <algorithm>
#include <cmath>

namespace splitspec::router {

void VerifySlowdown::DecayedMean::Add(double value, double forget) {
  if (weight >= kOutlierAfterWeight) {
    const double bound = std::log(kOutlierRatio);
    value = std::clamp(value, Mean() - bound, Mean() + bound);
  }
  weighted_sum = forget * weighted_sum + value;
  weight = forget * weight + 1.0;
}

void VerifySlowdown::Observe(bool beside_drafts, double observed_seconds, double predicted_seconds) {
  if (!(observed_seconds > 0) || !(predicted_seconds > 0) || !std::isfinite(observed_seconds) ||
      !std::isfinite(predicted_seconds)) {
    return;
  }
  const double log_ratio = std::log(observed_seconds / predicted_seconds);
  if (beside_drafts != last_beside_ && run_ >= kFreshRun) {
    // Against the run of the other kind just before: predictions have not moved since.
    const double others = baseline_[last_beside_ ? 1 : 0].Mean();
    log_slowdown_.Add(beside_drafts ? log_ratio - others : others - log_ratio, kForget);
  }
  baseline_[beside_drafts ? 1 : 0].Add(log_ratio, kBaselineForget);
  if (beside_drafts == last_beside_) {
    ++run_;
  } else {
    last_beside_ = beside_drafts;
    run_ = 1;
  }
}

double VerifySlowdown::Extra() const {
  if (!known()) return 0.0;
  return std::clamp(std::exp(log_slowdown_.Mean()) - 1.0, 0.0, kMaxExtra);
}

nlohmann::json VerifySlowdown::Describe() const {
  return nlohmann::json{{"extra", Extra()}, {"known", known()}, {"weight", log_slowdown_.weight}};
}

}  // namespace splitspec::router
