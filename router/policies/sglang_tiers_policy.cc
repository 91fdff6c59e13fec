// SGLang-style adaptive tiers: EMA of accepted drafts, warmup / interval / hysteresis gates.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "router/policies/policies.h"

namespace splitspec::router {

SglangTiersPolicy::SglangTiersPolicy(Config config) : config_(std::move(config)) {
  auto& tiers = config_.candidate_steps;
  std::sort(tiers.begin(), tiers.end());
  tiers.erase(std::unique(tiers.begin(), tiers.end()), tiers.end());
  if (tiers.empty()) tiers = {1, 3, 7};
  // Snap the initial steps to the nearest tier (the lower one on a tie).
  current_ = tiers.front();
  for (int32_t t : tiers) {
    if (std::abs(t - config_.initial_steps) < std::abs(current_ - config_.initial_steps)) {
      current_ = t;
    }
  }
  ema_ = current_ - 1.0;
}

std::vector<int32_t> SglangTiersPolicy::Decide(const PolicyInput& input) {
  std::vector<int32_t> k(input.requests.size(), 0);
  for (size_t i = 0; i < k.size(); ++i) k[i] = input.requests[i].speculative ? current_ : 0;
  return k;
}

void SglangTiersPolicy::Observe(const StepOutcome& outcome) {
  if (outcome.requests.empty()) return;
  double sum = 0;
  int n = 0;
  for (const RequestOutcome& r : outcome.requests) {
    if (r.proposed <= 0) continue;
    sum += r.accepted;
    ++n;
  }
  if (current_ > 0 && n > 0) {
    ema_ = (1 - config_.ema_alpha) * ema_ + config_.ema_alpha * (sum / n);
  }
  ++batches_;
  if (batches_ <= config_.warmup_batches) return;
  if ((batches_ - config_.warmup_batches) % std::max(config_.update_interval, 1) != 0) return;
  Recompute();
}

void SglangTiersPolicy::Recompute() {
  const auto& tiers = config_.candidate_steps;
  size_t idx = std::find(tiers.begin(), tiers.end(), current_) - tiers.begin();
  const int32_t old = current_;
  if (current_ == 0) {
    // Tier 0 drafts nothing, so its EMA cannot move: probe the next tier up.
    idx = std::min(idx + 1, tiers.size() - 1);
    if (tiers[idx] > 0 && ema_ < 0) ema_ = tiers[idx] - 1.0;
  } else {
    const size_t start = idx;
    while (idx > 0) {
      const int32_t lower = tiers[idx - 1];
      const double threshold = (lower == 0 ? 0.5 : lower - 0.5) + config_.down_hysteresis;
      if (ema_ <= threshold) {
        --idx;
      } else {
        break;
      }
    }
    if (idx == start) {
      while (idx + 1 < tiers.size() && ema_ > tiers[idx] - 0.5 + config_.up_hysteresis) ++idx;
    }
  }
  current_ = tiers[idx];
  if (current_ != old) ++switches_;
}

nlohmann::json SglangTiersPolicy::Describe() const {
  return {{"speculative_num_steps", current_},
          {"avg_spec_accept_length", ema_ + 1.0},
          {"ema_accepted_drafts", ema_},
          {"candidate_steps", config_.candidate_steps},
          {"batches", batches_},
          {"switches", switches_}};
}

}  // namespace splitspec::router
