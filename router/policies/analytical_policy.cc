// On-the-fly analytical window optimisation (per request).
#include <algorithm>

#include "router/expected_length.h"
#include "router/policies/policies.h"

namespace splitspec::router {

std::vector<int32_t> AnalyticalPolicy::Decide(const PolicyInput& input) {
  std::vector<int32_t> k(input.requests.size(), 0);
  if (input.requests.empty()) return k;
  const LatencyModel fallback;
  const LatencyModel& model = input.latency != nullptr ? *input.latency : fallback;
  const int32_t gmax = std::min(config_.gamma_max, input.max_k);
  double n_ctx = 0;
  for (const PolicyRequest& r : input.requests) n_ctx += r.context_tokens;
  const double n = static_cast<double>(input.requests.size());
  const double rpc = model.RpcSeconds();

  for (size_t i = 0; i < input.requests.size(); ++i) {
    const PolicyRequest& r = input.requests[i];
    if (!r.speculative || gmax <= 0) continue;
    // b: this request's MLE with the pool estimate as a weak prior.
    const double prior = input.acceptance != nullptr ? input.acceptance->Pool(r.pool)
                                                     : r.acceptance;
    double s = config_.prior_weight * prior, f = config_.prior_weight * (1 - prior);
    auto it = history_.find(r.id);
    if (it != history_.end()) {
      for (const Verification& v : it->second) {
        s += v.accepted;
        f += v.accepted < v.proposed ? 1 : 0;
      }
    }
    const double b = CappedMle(s, f, kAcceptanceCap, prior);
    const DrafterCost draft = model.EffectiveDrafter(r.pool);
    // a_q: one draft forward over the batch; model-free proposers cost a constant per step.
    // Scaled by the observed share of drafting steps wait for (1 without the pipeline).
    const double exposure = model.draft_exposure();
    const double a_q =
        draft.model_free ? 0.0 : draft.forward.Predict(n_ctx, n) * model.DraftShape(r.pool, n) * exposure;
    double best = -1;
    for (int32_t g = 0; g <= gmax; ++g) {
      const double b_p = model.TargetSeconds(n_ctx, n + g) + rpc;
      const double cost =
          g * a_q + b_p + (g > 0 ? rpc + (draft.model_free ? draft.constant_seconds * exposure : 0) : 0);
      const double value = ExpectedChainLength(b, g) / cost;
      if (value > best * (1 + 1e-12)) {
        best = value;
        k[i] = g;
      }
    }
    ++k_histogram_[k[i]];
  }
  return k;
}

void AnalyticalPolicy::Observe(const StepOutcome& outcome) {
  for (const RequestOutcome& r : outcome.requests) {
    if (r.proposed <= 0) continue;
    auto& h = history_[r.id];
    h.push_back({r.proposed, r.accepted});
    while (static_cast<int32_t>(h.size()) > std::max(config_.history, 1)) h.pop_front();
  }
}

nlohmann::json AnalyticalPolicy::Describe() const {
  nlohmann::json hist = nlohmann::json::object();
  for (const auto& [k, n] : k_histogram_) hist[std::to_string(k)] = n;
  return {{"gamma_max", config_.gamma_max}, {"history", config_.history}, {"k_histogram", hist}};
}

}  // namespace splitspec::router
