// FSM and cache-FSM window adaptation (per request).
#include <algorithm>

#include "router/policies/policies.h"

namespace splitspec::router {

int32_t FsmPolicy::GammaOf(spec::RequestId id) const {
  auto it = state_.find(id);
  return it == state_.end() ? -1 : it->second.gamma;
}

std::vector<int32_t> FsmPolicy::Decide(const PolicyInput& input) {
  std::vector<int32_t> k(input.requests.size(), 0);
  const int32_t gmax = std::min(config_.gamma_max, input.max_k);
  for (size_t i = 0; i < input.requests.size(); ++i) {
    const PolicyRequest& r = input.requests[i];
    if (!r.speculative) continue;
    auto [it, added] = state_.try_emplace(r.id);
    State& s = it->second;
    if (added) s.gamma = std::clamp(config_.gamma_init, 0, std::max(gmax, 0));
    if (config_.use_cache && !s.cache_built) {
      s.cache.insert(r.history.begin(), r.history.end());
      s.cache_built = true;
    }
    s.gamma = std::min(s.gamma, std::max(gmax, 0));
    if (s.gamma == 0 && gmax > 0) {
      if (++s.zero_steps >= std::max(config_.probe_after, 1)) {
        s.zero_steps = 0;
        k[i] = 1;  // probe
      }
      continue;
    }
    k[i] = s.gamma;
  }
  return k;
}

void FsmPolicy::Observe(const StepOutcome& outcome) {
  for (const RequestOutcome& r : outcome.requests) {
    auto it = state_.find(r.id);
    if (it == state_.end()) continue;
    State& s = it->second;
    if (r.proposed > 0) {
      const bool all = r.accepted >= r.proposed;
      int32_t delta;
      if (!config_.use_cache) {
        delta = all ? 1 : -1;
      } else {
        bool in_cache = false;
        for (int32_t j = 0; j < r.accepted && j < static_cast<int32_t>(r.emitted.size()); ++j) {
          in_cache |= s.cache.count(r.emitted[j]) > 0;
        }
        delta = (in_cache ? 1 : -1) + (all ? 1 : 0);
      }
      s.gamma = std::clamp(s.gamma + delta, 0, std::max(config_.gamma_max, 0));
    }
    if (config_.use_cache) s.cache.insert(r.emitted.begin(), r.emitted.end());
  }
}

nlohmann::json FsmPolicy::Describe() const {
  std::map<int32_t, int64_t> hist;
  for (const auto& [id, s] : state_) ++hist[s.gamma];
  nlohmann::json h = nlohmann::json::object();
  for (const auto& [g, n] : hist) h[std::to_string(g)] = n;
  return {{"gamma_max", config_.gamma_max}, {"live_gamma_histogram", h}};
}

}  // namespace splitspec::router
