// Draft-pool selection per request by estimated goodput: each pool's expected tokens per
// second for this request alone (its acceptance estimate on that pool x the pool's latency
// model, best k), switching only when another pool pays clearly more. Pools with too few
// observations are explored first, so every pool's estimate gets data.
//
// Thread-safety: stateless functions.
#ifndef SPLITSPEC_ROUTER_POOL_SELECTOR_H_
#define SPLITSPEC_ROUTER_POOL_SELECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/spec/worker_api.h"
#include "router/acceptance.h"
#include "router/latency_model.h"

namespace splitspec::router {

struct PoolSelectionConfig {
  double switch_margin = 0.1;           // switch when another pool scores > (1 + margin) x
  int64_t explore_observations = 16;    // a pool with fewer verifications gets new requests
};

// max over k in [0, max_k] of l(a, k) / (predicted single-request step time).
double PoolScore(const std::string& pool, double acceptance, int32_t context, int32_t max_k,
                 const LatencyModel& model);

// Pool for a new request (pools must be non-empty).
std::string ChoosePoolForNewRequest(const std::vector<std::string>& pools, int32_t context,
                                    int32_t max_k, const AcceptanceTracker& tracker,
                                    const LatencyModel& model, const PoolSelectionConfig& c);

// Pool for a running request this step: `current` unless another pays more by the margin.
std::string ReconsiderPool(const std::vector<std::string>& pools, spec::RequestId id,
                           const std::string& current, int32_t context, int32_t max_k,
                           const AcceptanceTracker& tracker, const LatencyModel& model,
                           const PoolSelectionConfig& c);

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_POOL_SELECTOR_H_
