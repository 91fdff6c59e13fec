// DraftCorrection (see draft_correction.h).
#include "router/draft_correction.h"

#include <algorithm>
#include <cmath>

namespace splitspec::router {

DraftCorrection::DraftCorrection(double prior_scale)
    : prior_scale_(std::clamp(std::isfinite(prior_scale) ? prior_scale : 1.0, kMinScale, kMaxScale)),
      scale_(prior_scale_) {}

void DraftCorrection::Observe(double line, double observed) {
  // A worker that reports 0 did not measure (fakes, old builds): no information.
  if (!(line > 0) || !std::isfinite(line) || !(observed > 0) || !std::isfinite(observed)) return;
  observed = std::clamp(observed, kMinScale * line, kMaxScale * line);
  if (w_ >= kOutlierAfterWeight) {
    const double predicted = Predict(line);
    observed = std::clamp(observed, predicted / kOutlierRatio, predicted * kOutlierRatio);
  }
  if (prior_line_ == 0) {
    prior_line_ = line;
    prior_weight_ = kPriorWeight;
  }
  w_ *= kForget;
  x_ *= kForget;
  xx_ *= kForget;
  y_ *= kForget;
  xy_ *= kForget;
  prior_weight_ *= kForget;
  w_ += 1;
  x_ += line;
  xx_ += line * line;
  y_ += observed;
  xy_ += line * observed;
  Refit();
}

void DraftCorrection::Refit() {
  // The observations plus the prior's pseudo-observation (prior_line_, prior_scale_ *
  // prior_line_) and the anchor (0, 0), which adds weight only.
  const double prior_y = prior_scale_ * prior_line_;
  const double w = w_ + prior_weight_ + kAnchorWeight;
  const double x = x_ + prior_weight_ * prior_line_;
  const double xx = xx_ + prior_weight_ * prior_line_ * prior_line_;
  const double y = y_ + prior_weight_ * prior_y;
  const double xy = xy_ + prior_weight_ * prior_line_ * prior_y;
  // The anchor's weight keeps the determinant positive once any line is positive.
  const double det = w * xx - x * x;
  if (!(det > 0)) return;
  scale_ = std::clamp((w * xy - x * y) / det, kMinScale, kMaxScale);
  per_call_ = (y - scale_ * x) / w;
}

double DraftCorrection::Apply(double per_call_seconds, double scale, double line) {
  if (!(line > 0)) return 0;
  return std::max(per_call_seconds + scale * line, kMinScale * line);
}

}  // namespace splitspec::router
