// SmartSpec's candidate batches (the paper's GetBatchCandidates, section 5): each step the
// FCFS prefixes items[0, m) of the running batch are the candidates; each gets its own best
// proposal lengths (router/goodput.h), and the prefix whose goodput is highest runs. Requests
// past the chosen prefix sit out the step (RouterCore forwards them nowhere; their worker
// sessions are untouched).
//
// Why a prefix search can pay at all here: the core's KV admission reserves every request's
// whole generation up front, so, unlike in the paper's vLLM setting, every prefix fits the KV
// cache and memory never forces a shorter batch. What remains is the latency model: a request
// whose marginal step time per expected token exceeds the batch's average (a long context
// under a large alpha, a speculative tail that forces a uniform k onto low-acceptance
// requests) lowers the step's goodput, and a prefix that leaves it out scores higher. With
// equal contexts and acceptance, and delta > 0, the full batch always wins.
//
// Starvation: a step-level argmax would leave the same tail out for ever. The caller passes
// `min_size`, the shortest prefix it may choose; RouterCore makes every request that sat out
// the previous step "must run", and SmartSpecPolicy sets min_size past the last of them, so a
// request waits at most one step (see router_core.h).
#ifndef SPLITSPEC_ROUTER_CANDIDATE_BATCHES_H_
#define SPLITSPEC_ROUTER_CANDIDATE_BATCHES_H_

#include <cstdint>
#include <vector>

#include "router/goodput.h"
#include "router/latency_model.h"

namespace splitspec::router {

struct BatchChoice {
  int32_t size = 0;        // run items [0, size); the rest sit out this step
  std::vector<int32_t> k;  // one per item; items past `size` get 0
  double goodput = 0;      // expected tokens / predicted step seconds of that prefix and k
};

// The best FCFS prefix of length in [min_size, n] (min_size clamped to [1, n]) and its best
// proposal lengths: one k for the prefix (per_request = false, SmartSpec's "batch"
// granularity) or one per request (as GoodputModel::BestPerRequest). Ties go to the longer
// prefix, so a shorter one is chosen only when the model says it strictly pays. Exact (the
// argument is in goodput.cc); O(n max_k^2) for one k, and for k per request about the cost of
// one BestPerRequest, not n of them.
// Thread-safety: a pure function of its arguments.
BatchChoice BestFcfsPrefix(const LatencyModel& model, const std::vector<GoodputItem>& items,
                           int32_t max_k, int32_t min_size, bool per_request);

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_CANDIDATE_BATCHES_H_
