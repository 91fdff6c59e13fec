// Acceptance estimators and the global / per-pool / per-request tracker.
#include "router/acceptance.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace splitspec::router {

double CappedMle(double successes, double failures, double cap, double fallback) {
  const double trials = successes + failures;
  if (!(trials > 0)) return std::min(fallback, cap);
  return std::min(successes / trials, cap);
}

std::optional<double> MleOf(absl::Span<const Verification> v, double cap) {
  double s = 0, f = 0;
  bool any = false;
  for (const Verification& x : v) {
    if (x.proposed <= 0) continue;
    any = true;
    s += std::clamp(x.accepted, 0, x.proposed);
    f += x.accepted < x.proposed ? 1 : 0;
  }
  if (!any) return std::nullopt;
  return CappedMle(s, f, cap, cap);
}

void WindowEstimator::ObserveStep(absl::Span<const Verification> step) {
  StepCounts counts;
  bool drafted = false;
  for (const Verification& v : step) {
    if (v.proposed <= 0) continue;
    drafted = true;
    counts.accepted += std::clamp(v.accepted, 0, v.proposed);
    counts.rejections += v.accepted < v.proposed ? 1 : 0;
  }
  if (!drafted) return;
  steps_.push_back(counts);
  while (static_cast<int32_t>(steps_.size()) > std::max(window_, 1)) steps_.pop_front();
}

std::optional<double> WindowEstimator::Estimate() const {
  if (steps_.empty()) return std::nullopt;
  double accepted = 0, rejections = 0;
  for (const StepCounts& c : steps_) {
    accepted += c.accepted;
    rejections += c.rejections;
  }
  return CappedMle(accepted, rejections, cap_, cap_);
}

void EmaEstimator::ObserveStep(absl::Span<const Verification> step) {
  const std::optional<double> rate = MleOf(step, cap_);
  if (!rate) return;
  value_ = value_ ? (1 - alpha_) * *value_ + alpha_ * *rate : *rate;
}

void MleEstimator::ObserveStep(absl::Span<const Verification> step) {
  for (const Verification& v : step) {
    if (v.proposed <= 0) continue;
    last_.push_back(v);
    while (static_cast<int32_t>(last_.size()) > std::max(history_, 1)) last_.pop_front();
  }
}

std::optional<double> MleEstimator::Estimate() const {
  std::vector<Verification> v(last_.begin(), last_.end());
  return MleOf(v, cap_);
}

absl::StatusOr<std::unique_ptr<AcceptanceEstimator>> MakeEstimator(const EstimatorConfig& c) {
  if (!(c.cap > 0 && c.cap <= 1)) return absl::InvalidArgumentError("acceptance cap in (0, 1]");
  if (c.kind == "window") {
    if (c.window < 1) return absl::InvalidArgumentError("acceptance window must be >= 1");
    return std::unique_ptr<AcceptanceEstimator>(new WindowEstimator(c.window, c.cap));
  }
  if (c.kind == "ema") {
    if (!(c.ema_alpha > 0 && c.ema_alpha <= 1)) {
      return absl::InvalidArgumentError("acceptance ema_alpha must be in (0, 1]");
    }
    return std::unique_ptr<AcceptanceEstimator>(new EmaEstimator(c.ema_alpha, c.cap));
  }
  if (c.kind == "mle") {
    if (c.history < 1) return absl::InvalidArgumentError("acceptance history must be >= 1");
    return std::unique_ptr<AcceptanceEstimator>(new MleEstimator(c.history, c.cap));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown acceptance estimator '", c.kind, "' (window, ema, mle)"));
}

absl::StatusOr<AcceptanceConfig> ParseAcceptanceConfig(const nlohmann::json& policy_config) {
  AcceptanceConfig c;
  if (!policy_config.is_object() || !policy_config.contains("acceptance")) return c;
  const nlohmann::json& j = policy_config["acceptance"];
  if (!j.is_object()) return absl::InvalidArgumentError("'acceptance' must be an object");
  try {
    c.global.kind = j.value("estimator", c.global.kind);
    c.global.window = j.value("window", c.global.window);
    c.global.ema_alpha = j.value("ema_alpha", c.global.ema_alpha);
    c.global.history = j.value("history", c.global.history);
    c.request_history = j.value("request_history", c.request_history);
    c.request_prior_weight = j.value("request_prior_weight", c.request_prior_weight);
    c.initial_acceptance = j.value("initial_acceptance", c.initial_acceptance);
    c.stale_after_steps = j.value("stale_after_steps", c.stale_after_steps);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("bad 'acceptance' config: ", e.what()));
  }
  auto probe = MakeEstimator(c.global);
  if (!probe.ok()) return probe.status();
  if (c.request_history < 1 || c.stale_after_steps < 1 || c.request_prior_weight < 0 ||
      !(c.initial_acceptance >= 0 && c.initial_acceptance <= 1)) {
    return absl::InvalidArgumentError(
        "acceptance: request_history >= 1, request_prior_weight >= 0, initial in [0, 1]");
  }
  return c;
}

AcceptanceTracker::AcceptanceTracker(AcceptanceConfig config) : config_(std::move(config)) {
  auto made = MakeEstimator(config_.global);
  if (!made.ok()) {  // validated by ParseAcceptanceConfig; fall back rather than crash
    config_.global = EstimatorConfig{};
    made = MakeEstimator(config_.global);
  }
  global_ = OwnedEstimator(std::move(*made));
}

void AcceptanceTracker::ObserveStep(const std::vector<Observation>& step) {
  ++step_;
  std::vector<Verification> all;
  std::map<std::string, std::vector<Verification>> by_pool;
  for (const Observation& o : step) {
    if (o.v.proposed <= 0) continue;
    all.push_back(o.v);
    by_pool[o.pool].push_back(o.v);
    auto& history = requests_[{o.id, o.pool}];
    history.push_back(o.v);
    while (static_cast<int32_t>(history.size()) > config_.request_history) history.pop_front();
    ++request_counts_[{o.id, o.pool}];
    const int64_t tokens = 1 + std::clamp(o.v.accepted, 0, o.v.proposed);
    global_totals_.steps += 1;
    global_totals_.tokens += tokens;
    pool_totals_[o.pool].steps += 1;
    pool_totals_[o.pool].tokens += tokens;
  }
  if (all.empty()) return;
  global_->ObserveStep(all);
  global_last_step_ = step_;
  for (auto& [pool, v] : by_pool) {
    pool_last_step_[pool] = step_;
    auto& est = pools_[pool];
    if (!est) est = OwnedEstimator(std::move(*MakeEstimator(config_.global)));
    est->ObserveStep(v);
    pool_counts_[pool] += static_cast<int64_t>(v.size());
  }
}

void AcceptanceTracker::Forget(spec::RequestId id) {
  for (auto it = requests_.lower_bound({id, std::string()});
       it != requests_.end() && it->first.first == id;) {
    it = requests_.erase(it);
  }
  for (auto it = request_counts_.lower_bound({id, std::string()});
       it != request_counts_.end() && it->first.first == id;) {
    it = request_counts_.erase(it);
  }
}

double AcceptanceTracker::Relax(std::optional<double> estimate, int64_t idle_steps,
                                int64_t verifications) const {
  const double prior = std::min(config_.initial_acceptance, config_.global.cap);
  if (!estimate) return prior;
  // Little evidence: the prior still counts as request_prior_weight verifications.
  const double n = static_cast<double>(verifications), m = config_.request_prior_weight;
  const double informed = n + m > 0 ? (n * *estimate + m * prior) / (n + m) : *estimate;
  const double stale = config_.stale_after_steps;
  const double w = std::clamp((idle_steps - stale) / stale, 0.0, 1.0);
  return (1 - w) * informed + w * prior;
}

double AcceptanceTracker::Global() const {
  return Relax(global_->Estimate(), step_ - global_last_step_, global_totals_.steps);
}

double AcceptanceTracker::Pool(const std::string& pool) const {
  auto it = pools_.find(pool);
  if (it == pools_.end()) return Global();
  auto est = it->second->Estimate();
  if (!est) return Global();
  return Relax(est, step_ - pool_last_step_.at(pool), PoolVerifications(pool));
}

double AcceptanceTracker::Request(spec::RequestId id, const std::string& pool) const {
  const double prior = Pool(pool);
  auto it = requests_.find({id, pool});
  if (it == requests_.end()) return prior;
  double s = 0, f = 0;
  for (const Verification& v : it->second) {
    s += std::clamp(v.accepted, 0, v.proposed);
    f += v.accepted < v.proposed ? 1 : 0;
  }
  const double w = config_.request_prior_weight;
  return CappedMle(s + w * prior, f + w * (1 - prior), config_.global.cap, prior);
}

int64_t AcceptanceTracker::PoolVerifications(const std::string& pool) const {
  auto it = pool_counts_.find(pool);
  return it == pool_counts_.end() ? 0 : it->second;
}

int64_t AcceptanceTracker::RequestVerifications(spec::RequestId id,
                                                const std::string& pool) const {
  auto it = request_counts_.find({id, pool});
  return it == request_counts_.end() ? 0 : it->second;
}

double AcceptanceTracker::MeanAcceptLength() const {
  return global_totals_.steps == 0
             ? 0.0
             : static_cast<double>(global_totals_.tokens) / global_totals_.steps;
}

std::map<std::string, double> AcceptanceTracker::MeanAcceptLengthByPool() const {
  std::map<std::string, double> out;
  for (const auto& [pool, t] : pool_totals_) {
    out[pool] = t.steps == 0 ? 0.0 : static_cast<double>(t.tokens) / t.steps;
  }
  return out;
}

}  // namespace splitspec::router
