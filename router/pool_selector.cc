// Goodput-based drafter pool choice.
#include "router/pool_selector.h"

#include <limits>

#include "router/expected_length.h"

namespace splitspec::router {

double PoolScore(const std::string& pool, double acceptance, int32_t context, int32_t max_k,
                 const LatencyModel& model) {
  double best = 0;
  for (int32_t k = 0; k <= max_k; ++k) {
    const int32_t ctx[1] = {context};
    const int32_t kk[1] = {k};
    const double t = model.TargetSeconds(context, k + 1) + model.RpcSeconds() +
                     (k > 0 ? model.DraftSeconds(pool, ctx, kk) + model.RpcSeconds() : 0.0);
    if (t > 0) best = std::max(best, ExpectedChainLength(acceptance, k) / t);
  }
  return best;
}

std::string ChoosePoolForNewRequest(const std::vector<std::string>& pools, int32_t context,
                                    int32_t max_k, const AcceptanceTracker& tracker,
                                    const LatencyModel& model, const PoolSelectionConfig& c) {
  std::string least;
  int64_t least_seen = std::numeric_limits<int64_t>::max();
  for (const std::string& p : pools) {
    const int64_t seen = tracker.PoolVerifications(p);
    if (seen < least_seen) {
      least_seen = seen;
      least = p;
    }
  }
  if (least_seen < c.explore_observations) return least;
  std::string best = pools.front();
  double best_score = -1;
  for (const std::string& p : pools) {
    const double s = PoolScore(p, tracker.Pool(p), context, max_k, model);
    if (s > best_score) {
      best_score = s;
      best = p;
    }
  }
  return best;
}

std::string ReconsiderPool(const std::vector<std::string>& pools, spec::RequestId id,
                           const std::string& current, int32_t context, int32_t max_k,
                           const AcceptanceTracker& tracker, const LatencyModel& model,
                           const PoolSelectionConfig& c) {
  if (pools.size() < 2) return pools.empty() ? current : pools.front();
  const double current_score =
      PoolScore(current, tracker.Request(id, current), context, max_k, model);
  std::string best = current;
  double best_score = current_score * (1 + c.switch_margin);
  for (const std::string& p : pools) {
    if (p == current) continue;
    const double s = PoolScore(p, tracker.Request(id, p), context, max_k, model);
    if (s > best_score) {
      best_score = s;
      best = p;
    }
  }
  return best;
}

}  // namespace splitspec::router
