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
  // Tokens its drafter must feed before drafting beyond a steady step's one
  // (PolicyRequest::draft_catch_up), and the tokens it may still generate (0: unknown); see
  // ChargedCatchUpTokens.
  int32_t draft_catch_up = 0;
  int32_t remaining_tokens = 0;
  // Its sampling: a draft made ahead covers as many other outcomes as
  // LatencyModel::draft_ahead_alternatives allows for it, and they catch a greedy and a sampled
  // target's token at rates learnt apart (LatencyModel::DraftAheadLands).
  bool greedy = true;
};

// The catch-up tokens a step is charged for when `item` drafts (at its drafter's per-token
// cost, on its first draft token). Drafting only in some steps makes the drafter re-feed the
// tokens of the others, so a borderline batch that toggles between k = 0 and k = 1 pays more
// than either steady choice: the first kCatchUpChargedInFull tokens are charged in full, which
// makes resuming wait until drafting clearly pays. More than that is a drafter prefill (a
// request admitted without drafting, or one that paused long), paid once for the rest of the
// request: it is spread over the steps the request has left (remaining_tokens / (1 + a), a
// step's yield at k = 1), so a request resumes only when it has enough left to win it back;
// with remaining_tokens unknown it is charged in full.
constexpr int32_t kCatchUpChargedInFull = 8;
double ChargedCatchUpTokens(const GoodputItem& item);

// Thread-safety: immutable after construction; the referenced model must outlive it.
class GoodputModel {
 public:
  GoodputModel(const LatencyModel& model, std::vector<GoodputItem> items, int32_t max_k);

  // Step time: target forward over sum(context) / sum(k_i + 1) tokens + one RPC, plus per
  // pool that drafts anything its draft time (catch-up charges included) + one RPC; with the
  // pipeline, the part of those the step is expected to wait for (DraftExposure).
  double StepSeconds(absl::Span<const int32_t> k) const;
  double ExpectedTokens(absl::Span<const int32_t> k) const;  // sum_i l(a_i, k_i)
  double Goodput(absl::Span<const int32_t> k) const;

  // SmartSpec "batch" granularity: the same k in [0, max_k] for every speculative request.
  std::vector<int32_t> BestUniform() const;
  // "request" granularity: exact argmax over all k vectors (see goodput.cc for the proof).
  std::vector<int32_t> BestPerRequest() const;

  // SmartSpec's candidate batches (router/candidate_batches.h): the best FCFS prefix
  // items[0, size), size in [min_size, n] (min_size clamped to [1, n]), with its best uniform
  // k (per_request = false) or k_i (true); entries past `size` are 0. Exact, in one pass over
  // the prefixes (see goodput.cc); ties go to the longer prefix.
  struct Prefix {
    int32_t size = 0;
    std::vector<int32_t> k;
    double goodput = 0;
  };
  Prefix BestPrefix(int32_t min_size, bool per_request) const;
  // Goodput of running only items[0, size) with k (k past `size` ignored).
  double PrefixGoodput(size_t size, absl::Span<const int32_t> k) const;
  // Step time of items[0, size) when item i drafts depth[i] levels and sends verified[i]
  // draft nodes (a chain: verified == depth; a tree: more nodes than levels). The target
  // reads verified[i] + 1 tokens; drafting is costed as a chain of depth[i] (a tree drafter
  // runs one forward per level too; its few extra tokens per forward are not modelled).
  double PrefixStepSecondsFor(size_t size, absl::Span<const int32_t> depth,
                              absl::Span<const int32_t> verified) const;

  size_t size() const { return items_.size(); }

  // What a pool's drafting at depth D costs a step, as multiples of the serial figures (draft
  // time of a chain of D, one RPC). Without the pipeline both are 1. With it (the latency
  // model's pipeline()), the chain is drafted one deeper (its last token the guess a draft
  // made ahead builds on) and, while the target verifies, the next step's chain is drafted
  // ahead; the step waits for what of that outlasts the verify call, and for a serial Propose
  // only when the draft made ahead missed (h: the chance that chain and guess all land, each
  // token at its request's acceptance estimate, or for a greedy request that one of the other
  // outcomes its draft made ahead covers catches the miss, averaged over the pool's requests;
  // T_ahead counts those outcomes' chains):
  //   exposed = (1 - h) * (T_draft(D + 1) + rpc) + max(0, T_ahead(D + 1) - T_verify(D))
  //             + slowdown * T_verify(D)
  // (slowdown: what drafting beside a verify call adds to it, LatencyModel::verify_slowdown)
  // or, where that is not below the serial T_draft(D) + rpc, the serial figures: the chain
  // then gets no guess and nothing is drafted ahead (the same test as
  // RouterCore::DraftGuessPays). At D = max_k there is no guess, so no draft ahead.
  struct DraftExposure {
    double draft = 1.0;  // multiplies the chain's draft time (and its catch-up charges)
    double rpc = 1.0;    // multiplies the drafter's RPC
  };
  const DraftExposure& Exposure(size_t pool, int32_t depth) const;

 private:
  // Fills exposure_ (pipeline only): every pool's speculative requests at every depth.
  void ComputePipelineExposure();
  // pool_costs_ with each pool's draft cost scaled by its exposure at depth[p].
  std::vector<DrafterCost> CostsAtDepths(const std::vector<int32_t>& depth) const;
  double PrefixStepSeconds(size_t size, absl::Span<const int32_t> k) const;
  // The catch-up charge of item i when it drafts with a drafter of cost `c`.
  double CatchUpSeconds(size_t i, const DrafterCost& c) const;
  // Marginal cost of speculative item i's s-th draft token (s >= 1): its verification, its
  // draft forward, and on the first one its catch-up charge; `costs` per pool, as effective.
  double MarginalCost(size_t i, int32_t s, const ForwardCoefficients& target,
                      const std::vector<DrafterCost>& costs) const;
  std::vector<int32_t> SolveForDepths(const std::vector<int32_t>& depth_of_pool) const;
  // The relaxed per-request problem over prefixes [min_size, n] for one depth vector; returns
  // the prefix size and writes its k.
  int32_t SolvePrefixForDepths(const std::vector<int32_t>& depth_of_pool, int32_t min_size,
                               std::vector<int32_t>* k) const;
  Prefix BestUniformPrefix(int32_t min_size) const;
  Prefix BestPerRequestPrefix(int32_t min_size) const;
  // Enumerates the depth vectors BestPerRequest considers (every vector in [0, max_k]^pools,
  // or one shared depth for all pools when there are too many).
  template <typename F>
  void ForEachDepthVector(F&& f) const;

  const LatencyModel& model_;
  std::vector<GoodputItem> items_;
  int32_t max_k_;
  std::vector<std::string> pools_;   // distinct pools of speculative items
  std::vector<int32_t> pool_index_;  // per item, index into pools_ (-1: not speculative)
  // Per pool, resolved once (the model does not change while this object lives).
  std::vector<LatencyModel::ResolvedDrafter> pool_drafters_;
  std::vector<DrafterCost> pool_costs_;  // model_.EffectiveDrafter(pool)
  std::vector<DraftExposure> exposure_;   // [pool * (max_k + 1) + depth]; empty: serial
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_GOODPUT_H_
