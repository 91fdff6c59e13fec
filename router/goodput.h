// SmartSpec's goodput for one candidate step: expected generated tokens over the predicted
// step time, and the proposal lengths that maximise it (one k for the batch, or one k_i per
// request chosen jointly and exactly).
#ifndef SPLITSPEC_ROUTER_GOODPUT_H_
#define SPLITSPEC_ROUTER_GOODPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "router/latency_model.h"

namespace splitspec::router {

struct GoodputItem {
  int32_t context = 0;      // tokens the target reads from its KV cache for this request
  double acceptance = 0;    // per-token acceptance estimate
  std::string pool;         // drafter pool it would draft with
  bool speculative = true;  // false: k is forced to 0
};

// Thread-safety: immutable after construction; the referenced model must outlive it.
class GoodputModel {
 public:
  GoodputModel(const LatencyModel& model, std::vector<GoodputItem> items, int32_t max_k);

  // Step time: target forward over sum(context) / sum(k_i + 1) tokens + one RPC, plus per
  // pool that drafts anything its draft time + one RPC (pools are called one after another).
  double StepSeconds(absl::Span<const int32_t> k) const;
  double ExpectedTokens(absl::Span<const int32_t> k) const;  // sum_i l(a_i, k_i)
  double Goodput(absl::Span<const int32_t> k) const;

  // SmartSpec "batch" granularity: the same k in [0, max_k] for every speculative request.
  std::vector<int32_t> BestUniform() const;
  // "request" granularity: exact argmax over all k vectors (see goodput.cc for the proof).
  std::vector<int32_t> BestPerRequest() const;

  size_t size() const { return items_.size(); }

 private:
  std::vector<int32_t> SolveForDepths(const std::vector<int32_t>& depth_of_pool) const;

  const LatencyModel& model_;
  std::vector<GoodputItem> items_;
  int32_t max_k_;
  std::vector<std::string> pools_;   // distinct pools of speculative items
  std::vector<int32_t> pool_index_;  // per item, index into pools_ (-1: not speculative)
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_GOODPUT_H_
