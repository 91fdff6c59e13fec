// The concrete speculation policies (one small class each; the router only sees
// SpeculationPolicy). Configs are the JSON objects of `--policy-config`; unknown keys are
// ignored, wrong types are INVALID_ARGUMENT from MakePolicy.
#ifndef SPLITSPEC_ROUTER_POLICIES_POLICIES_H_
#define SPLITSPEC_ROUTER_POLICIES_POLICIES_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "router/policy.h"

namespace splitspec::router {

// `none`: always k = 0.
class NonePolicy : public SpeculationPolicy {
 public:
  std::string Name() const override { return "none"; }
  std::vector<int32_t> Decide(const PolicyInput& input) override;
  nlohmann::json Describe() const override { return {{"k", 0}}; }
};

// `static:K`: a chain of K for every speculative request.
class StaticPolicy : public SpeculationPolicy {
 public:
  explicit StaticPolicy(int32_t k) : k_(k) {}
  std::string Name() const override { return "static:" + std::to_string(k_); }
  std::vector<int32_t> Decide(const PolicyInput& input) override;
  nlohmann::json Describe() const override { return {{"k", k_}}; }

 private:
  int32_t k_;
};

// `static-tree:D:N`: a tree of at most N nodes over D levels for every speculative request
// (N <= D is a chain of D).
class StaticTreePolicy : public SpeculationPolicy {
 public:
  StaticTreePolicy(int32_t depth, int32_t nodes) : depth_(depth), nodes_(nodes) {}
  std::string Name() const override {
    return "static-tree:" + std::to_string(depth_) + ":" + std::to_string(nodes_);
  }
  std::vector<int32_t> Decide(const PolicyInput& input) override;
  std::vector<ProposalChoice> DecideProposals(const PolicyInput& input) override;
  nlohmann::json Describe() const override { return {{"depth", depth_}, {"nodes", nodes_}}; }

 private:
  int32_t depth_;
  int32_t nodes_;
};

// `smartspec`: maximise estimated goodput (router/goodput.h) each step over SmartSpec's
// candidate batches, the FCFS prefixes of the running batch (router/candidate_batches.h):
// requests past the chosen prefix sit out the step; prefixes that would leave out a request
// the core marks must_run are not candidates.
// Config: {"granularity": "batch" | "request" (default batch), "max_k": V (default 8),
//          "prefill_disable_threshold": 0.7, "prefill_resume_threshold": 0.3, "prefill_window": 32,
//          "prefix_search": true (false: always the whole batch),
//          "trees": true, "max_tree_nodes": 32, "explore_verifications": 8}
// Trees: after the chain decision, each speculative request in turn switches to the tree
// shape (depth D, N nodes) that most raises the batch's goodput, if any does: its expected
// tokens from the per-depth tree estimates (router/tree_acceptance.h), its cost N + 1
// verified tokens (see tree_shapes in the .cc for the shapes tried).
// Prefill disabling: when, in more than the threshold of the last `prefill_window` steps,
// goodput would have proposed nothing even with every request of the batch speculative
// (pool estimates), new requests are admitted non-speculative. Judging the counterfactual
// batch, not the actual one, keeps the switch from locking itself off (see the .cc); so does
// prefilling the drafter of every request admitted speculative, even while recent steps drafted
// nothing (AdmissionExpectsDrafting: a request left to catch up on its prompt is priced out of
// drafting by that catch-up, and would keep the policy's steps at k = 0). A request admitted
// non-speculative resumes drafting once that share has fallen to `prefill_resume_threshold` (lower,
// so that load hovering at the threshold does not pay drafter prefills for requests that will
// not speculate); at one client this is what speculation paying again looks like.
// Exploring: a pool's acceptance is only learnt from its verified drafts, and before any it is
// the estimators' prior (router/acceptance.h), which may price every chain out (a drafter whose
// forwards cost but whose guesses nearly always land). Until a pool has
// `explore_verifications` verified drafts, a speculative request the goodput search leaves at
// plain decoding drafts a chain of one instead; 0 turns this off.
class SmartSpecPolicy : public SpeculationPolicy {
 public:
  struct Config {
    bool per_request = false;
    int32_t max_k = 8;
    double prefill_disable_threshold = 0.7;
    double prefill_resume_threshold = 0.3;
    int32_t prefill_window = 32;
    bool prefix_search = true;
    bool trees = true;
    int32_t max_tree_nodes = 32;
    int32_t explore_verifications = 8;
  };
  explicit SmartSpecPolicy(Config config) : config_(config) {}
  std::string Name() const override { return "smartspec"; }
  std::vector<int32_t> Decide(const PolicyInput& input) override;
  // RecordProposals(PriceProposals(input)).
  std::vector<ProposalChoice> DecideProposals(const PolicyInput& input) override;
  bool PricesAhead() const override { return true; }
  std::unique_ptr<PricedProposals> PriceProposals(const PolicyInput& input) const override;
  std::vector<ProposalChoice> RecordProposals(std::unique_ptr<PricedProposals> priced) override;
  bool SpeculateNewRequest() override;
  bool ResumeSpeculation() override;
  // Admission is the prefill-disabling judgement, made on the steady state (see Decide).
  bool AdmissionExpectsDrafting() const override { return true; }
  nlohmann::json Describe() const override;
  double ZeroFraction() const;

 private:
  // Decide's chains before its bookkeeping: each request's k (kSitOut past the batch prefix
  // chosen), how many run, the k each speculative one that runs adds to the histogram, and
  // prefill disabling's signal (whether the steady state would draft nothing).
  struct ChainPlan {
    std::vector<int32_t> k;
    size_t run = 0;
    std::vector<int32_t> counted_k;
    bool nothing = false;
  };
  struct Priced;
  double ChainAcceptance(const PolicyInput& input, const PolicyRequest& r) const;
  ChainPlan PriceChains(const PolicyInput& input) const;
  void RecordChains(const ChainPlan& plan);
  // The chains, then a tree for each request where one beats its chain for the batch.
  std::vector<ProposalChoice> PriceShapes(const PolicyInput& input, const std::vector<int32_t>& k) const;
  // Chains of one for the plain-decoding requests of pools not yet measured (see above); how
  // many it gave.
  int64_t Explore(const PolicyInput& input, std::vector<ProposalChoice>* choices) const;
  Config config_;
  std::deque<bool> proposed_nothing_;
  std::map<int32_t, int64_t> k_histogram_;
  int64_t disabled_prefills_ = 0;
  int64_t resumed_requests_ = 0;
  int64_t short_prefix_steps_ = 0;  // steps that ran a proper prefix of the batch
  int64_t sat_out_ = 0;             // request-steps left out
  int64_t tree_choices_ = 0;        // request-steps given a tree
  std::map<std::string, int64_t> shape_histogram_;  // "D:N" of the trees chosen
  int64_t explored_ = 0;            // request-steps given a chain of one to measure a pool
};

// `sglang-tiers`: SGLang's adaptive steps. EMA (ema_alpha) of the batch-average number of
// accepted draft tokens; no decision during the first warmup_batches batches, then one
// every update_interval batches: move down one tier while ema <= (lower tier - 0.5) +
// down_hysteresis (0.5 + down_hysteresis when the lower tier is 0), otherwise move up one
// tier while ema > (current tier - 0.5) + up_hysteresis. That is target ~ round(ema) + 1,
// clamped to the tiers. A switch decided after a verify applies from the next step on.
// Config keys and defaults (SGLang's): candidate_steps [1, 3, 7], ema_alpha 0.2,
// warmup_batches 10, update_interval 5, down_hysteresis -0.25, up_hysteresis 0.0, plus
// initial_steps (3; snapped to the nearest tier). The EMA starts at initial tier - 1 and is
// not updated while the tier is 0; from tier 0 a decision probes the next tier up.
class SglangTiersPolicy : public SpeculationPolicy {
 public:
  struct Config {
    std::vector<int32_t> candidate_steps = {1, 3, 7};
    double ema_alpha = 0.2;
    int32_t warmup_batches = 10;
    int32_t update_interval = 5;
    double down_hysteresis = -0.25;
    double up_hysteresis = 0.0;
    int32_t initial_steps = 3;
  };
  explicit SglangTiersPolicy(Config config);
  std::string Name() const override { return "sglang-tiers"; }
  std::vector<int32_t> Decide(const PolicyInput& input) override;
  void Observe(const StepOutcome& outcome) override;
  nlohmann::json Describe() const override;
  int32_t active_tier() const { return current_; }
  double ema_accept_len() const { return ema_; }
  int64_t batches() const { return batches_; }

 private:
  void Recompute();
  Config config_;
  int32_t current_ = 0;
  double ema_ = 0;
  int64_t batches_ = 0;
  int64_t switches_ = 0;
};

// `analytical`: on-the-fly window optimisation per request:
//   gamma* = argmax_{gamma in [0, gamma_max]} (1 - b^(gamma+1)) / ((1 - b)(gamma a_q + b_p(gamma)))
// b: the request's MLE over its last `history` verifications (capped 0.98), with the pool
// estimate as a prior worth `prior_weight` trials. a_q and b_p come from the latency model,
// which the router corrects online from observed step times ("estimated from recent steps"):
// a_q = one draft forward of the current batch, b_p(gamma) = the target forward of the batch
// with gamma more tokens + the RPCs. Config: {"gamma_max": 8, "history": 8, "prior_weight": 1}.
class AnalyticalPolicy : public SpeculationPolicy {
 public:
  struct Config {
    int32_t gamma_max = 8;
    int32_t history = 8;
    double prior_weight = 1.0;
  };
  explicit AnalyticalPolicy(Config config) : config_(config) {}
  std::string Name() const override { return "analytical"; }
  std::vector<int32_t> Decide(const PolicyInput& input) override;
  void Observe(const StepOutcome& outcome) override;
  void Forget(spec::RequestId id) override { history_.erase(id); }
  nlohmann::json Describe() const override;

 private:
  Config config_;
  std::map<spec::RequestId, std::deque<Verification>> history_;
  std::map<int32_t, int64_t> k_histogram_;
};

// `fsm`: per-request saturating counter: gamma - 1 on any rejection, + 1 when all drafts
// were accepted, within [0, gamma_max]. `cache-fsm`: + 1 when an accepted draft token is
// already in the request's token cache (prompt + history), + 1 more when all were accepted,
// - 1 when none of the accepted tokens is in the cache. A request at gamma 0 would never
// learn again, so after `probe_after` steps at 0 it probes gamma = 1 once.
// Config: {"gamma_max": 8, "gamma_init": 3, "probe_after": 8}.
class FsmPolicy : public SpeculationPolicy {
 public:
  struct Config {
    int32_t gamma_max = 8;
    int32_t gamma_init = 3;
    int32_t probe_after = 8;
    bool use_cache = false;
  };
  explicit FsmPolicy(Config config) : config_(config) {}
  std::string Name() const override { return config_.use_cache ? "cache-fsm" : "fsm"; }
  std::vector<int32_t> Decide(const PolicyInput& input) override;
  void Observe(const StepOutcome& outcome) override;
  void Forget(spec::RequestId id) override { state_.erase(id); }
  nlohmann::json Describe() const override;
  int32_t GammaOf(spec::RequestId id) const;

 private:
  struct State {
    int32_t gamma = 0;
    int32_t zero_steps = 0;
    bool cache_built = false;
    std::unordered_set<int32_t> cache;
  };
  Config config_;
  std::map<spec::RequestId, State> state_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_POLICIES_POLICIES_H_
