// RouterCore: the router's scheduler, free of gRPC. It owns the request queue, continuous
// step-level batching, KV admission, the speculation policy, acceptance estimators, latency
// model and every request's token history, and talks to workers through worker_clients.h.
//
// One step (RunStep):
//  1. take cancellations; admit waiting requests FCFS while their KV reservation fits;
//  2. prefill the admitted ones on the verifier (the drafter catches up lazily: its first
//     Propose carries known_length = 0 and the whole history);
//  3. pick each request's drafter pool, ask the policy for k per request, clamp it; a
//     policy may leave requests out of the step (kSitOut, SmartSpec's candidate batches);
//  4. Drafter.Propose per pool for the requests with k > 0 (a failed call = k 0 this step);
//  5. Verifier.Verify for the requests that run; append tokens, check stop conditions, stream;
//  6. feed estimators, latency-model correction and the policy; release finished sessions.
//
// KV admission (why it is safe): a request reserves ceil((prompt + max_tokens + max_k + 1) /
// block_size) verifier blocks when admitted and keeps them until it finishes, so a running
// request can never run out of KV: no preemption and no mid-generation failure. The price is
// admitting fewer requests than grow-as-you-go would. A request that could never fit is
// refused at Submit (INVALID_ARGUMENT). The drafter's KV is not reserved: if a drafter runs
// out, its Propose fails and those requests just decode with k = 0.
//
// Sitting out a step (why it is safe, and why nobody starves): a request left out of a step
// is sent to no worker, so its verifier session keeps its committed tokens + pending token and
// the drafter's `known` count stays valid; the next step it runs in continues exactly where it
// stopped (the fakes in tests/unit/router check this token for token). A request that sat out
// RouterOptions::max_sit_out_steps consecutive steps (default 1) is marked must_run, and the
// core overrides a policy that still leaves it out (it runs with k = 0), so every request is
// forwarded at least once every max_sit_out_steps + 1 steps and finishes in bounded time.
// We chose this bound over aging/rotation schemes because it needs no policy cooperation
// and keeps the policy's candidates FCFS prefixes: SmartSpec only searches prefixes that
// include every must-run request. Every step forwards at least one request.
//
// Thread-safety: Submit, Cancel, Snapshot, StopAccepting, Idle and WaitForWork are
// thread-safe. Init and RunStep must be called from one thread (the step loop), never
// concurrently with each other. Worker clients, the policy and the estimators are only
// touched by that thread. Event sinks run on it, with no lock held (with defer_token_events,
// a step's token events run on its side thread while it waits for the next verify call).
#ifndef SPLITSPEC_ROUTER_ROUTER_CORE_H_
#define SPLITSPEC_ROUTER_ROUTER_CORE_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"
#include "router/acceptance.h"
#include "router/clock.h"
#include "router/goodput.h"
#include "router/latency_model.h"
#include "router/mutex.h"
#include "router/policy.h"
#include "router/online_fit.h"
#include "router/pool_selector.h"
#include "router/shape_calibration.h"
#include "router/side_thread.h"
#include "router/request_types.h"
#include "router/verifier_replicas.h"
#include "router/worker_clients.h"

namespace splitspec::router {

// What happened in one decode step (for the simulator, metrics and tests).
struct StepStats {
  int64_t step = 0;
  int32_t batch_size = 0;         // requests forwarded (sat-out ones not counted)
  int32_t sat_out = 0;            // running requests left out of this step by the policy
  int32_t prefills = 0;           // requests prefilled just before this step
  std::vector<int32_t> k;         // per forwarded request, the k sent to the drafter (clamped)
  int32_t drafted_tokens = 0;     // draft tokens actually verified
  int32_t accepted_tokens = 0;
  int32_t emitted_tokens = 0;
  int32_t tree_requests = 0;      // requests whose verified draft was a tree
  int32_t draft_ahead_issued = 0;  // drafts made ahead for the next step (pipeline)
  int32_t draft_ahead_used = 0;    // drafts of this step that were made ahead (no Propose wait)
  int32_t draft_ahead_hypothesis_held = 0;   // drafts made ahead kept: their hypothesis held
  int32_t draft_ahead_alternatives_held = 0;  // drafts made ahead kept for another outcome
  int32_t draft_ahead_dropped = 0;            // drafts made ahead of which no outcome held
  bool decided_ahead = false;  // the policy's decision was priced beside the previous verify call
  double draft_ahead_seconds = 0;  // drafters' reported compute for the drafts made ahead
  double draft_ahead_slowest_seconds = 0;  // of it, the slowest pool's (pools run in parallel)
  double hidden_draft_seconds = 0; // of it, what ran while the verifier computed
  double schedule_seconds = 0;    // admission + pool choice + policy
  double prefill_seconds = 0;     // wall time of the Prefill call (0 without one)
  double draft_seconds = 0;       // drafters' reported compute
  double verify_seconds = 0;      // verifier's reported compute
  double wall_seconds = 0;        // the decode step, scheduling to bookkeeping
  // The router's time from the end of the previous decode step's wall time to this one's start
  // when the two ran back to back (the loop's next step while there is work): the previous
  // step's last bookkeeping (policy; metrics and the /server_info snapshot unless
  // RouterOptions::defer_step_reports), admission and replica checks; a Prefill call in
  // between is left out. 0 for a step after an idle wait.
  double between_steps_seconds = 0;
  // wall + between_steps - the compute it waited for (StepOverheadSeconds)
  double overhead_seconds = 0;
  // The step's wall time outside its worker calls, between_steps included: planning, applying
  // the answers, bookkeeping. With rpc_overhead_seconds it splits a serial step's overhead into
  // the router's share and the calls' (transport, the workers' handling around their compute).
  double router_seconds = 0;
  // For metrics (filled only when RouterOptions::step_observer is set):
  double rpc_overhead_seconds = 0;  // RPC wall time beyond the workers' reported compute
  double estimated_goodput = 0;     // tokens/s the latency model and estimates predicted for k
  double verify_slowdown = 0;       // pipeline: LatencyModel::verify_slowdown_estimate().Extra()
  std::vector<RequestOutcome> requests;  // per verified request: pool, proposed, accepted
  double MeanK() const;
};

// A decode step's orchestration overhead: its wall time (with the router's time since the
// previous step ended, when the two ran back to back: StepStats::between_steps_seconds) less
// the compute it had to wait for. The serial Propose calls come first (pools in parallel, so
// the slowest counts), then the verify call, beside which the drafts for the next step are made
// ahead (RouterOptions::pipeline); the step waits for both. What is left is RPC transport, scheduling and
// bookkeeping. In a serial speculative step the drafter's compute is not overhead, and in a
// pipelined one a draft made ahead that outlasts the verify call is not either: the share of
// draft time hidden (ServerInfo::hidden_draft_seconds_total over draft_seconds_total) tells how
// much of the drafting the steps overlapped.
inline double StepOverheadSeconds(double wall, double serial_draft_slowest, double verify,
                                  double draft_ahead_slowest) {
  return wall - (serial_draft_slowest + std::max(verify, draft_ahead_slowest));
}

struct ServerInfo {
  std::string policy;
  nlohmann::json policy_state;  // active tier, k histogram, ... (policy-specific)
  double mean_accept_length = 0;  // tokens per speculated request-step, bonus included
  std::map<std::string, double> mean_accept_length_by_pool;
  double acceptance_estimate = 0;
  std::map<std::string, double> acceptance_by_pool;
  int32_t queue_depth = 0;
  int32_t running = 0;
  int64_t steps = 0;
  int64_t completed = 0;
  int64_t draft_ahead_used = 0;     // pipeline: drafts made ahead and used
  int64_t decisions_made_ahead = 0;  // pipeline: steps that took a decision priced ahead
  int64_t draft_ahead_dropped = 0;  // pipeline: drafts made ahead of which no outcome held
  // pipeline: drafts made ahead whose hypothesis failed, kept for another outcome that held
  int64_t draft_ahead_alternatives_held = 0;
  double draft_seconds_total = 0;   // drafters' compute, serial and ahead
  double hidden_draft_seconds_total = 0;  // of it, overlapped with verification
  std::map<int32_t, int64_t> k_histogram;  // chosen k per request-step, lifetime
  std::string latency_model;
  nlohmann::json latency_refit;  // OnlineForwardFit::Describe()
  double overhead_p50_us = 0;
  double overhead_p99_us = 0;
  int32_t total_blocks = 0;
  int32_t reserved_blocks = 0;
  std::vector<std::string> drafter_pools;
};

inline constexpr int32_t kDefaultSlowdownProbeSteps = 32;
inline constexpr double kMaxSlowdownProbeShare = 0.01;

struct RouterOptions {
  int32_t max_queue = 256;    // waiting requests; Submit beyond it: RESOURCE_EXHAUSTED
  int32_t max_running = 64;   // batch size cap
  int32_t max_k = 8;          // V; further capped by the workers' max_draft_tokens
  // Consecutive steps a request may sit out before it must run (0: nobody ever sits out).
  int32_t max_sit_out_steps = 1;
  int32_t eos_token_id = -1;  // < 0: none
  // Needed for stop strings: the text of a span of generated token ids.
  std::function<std::string(absl::Span<const int32_t>)> detokenize;
  AcceptanceConfig acceptance;
  PoolSelectionConfig pool_selection;
  // Called on the loop thread after every decode step.
  std::function<void(const StepStats&)> step_observer;
  // Called on the loop thread as each request leaves the queue for prefill, with the time it
  // waited since Submit and its prompt length (queue-time metrics).
  std::function<void(RequestId id, double queue_seconds, int32_t prompt_tokens)> admission_observer;
  // Verifier replicas and failover (router_failover.cc). A request whose replica fails is
  // re-prefilled with its whole committed history on another; with no replica up it waits
  // this long (from losing its replica) before failing with UNAVAILABLE.
  double failover_wait_seconds = 10;
  double probe_interval_seconds = 0.25;  // how often a down replica is probed again
  // Worker call deadlines: deadline_factor x the latency model's prediction for the call
  // (plus the RPC overhead), at least deadline_floor_seconds, at most deadline_ceiling_seconds.
  double deadline_factor = 8;
  double deadline_floor_seconds = 0.5;
  double deadline_ceiling_seconds = 60;
  // Request ids are (instance_id << 40) | sequence number, so ids of different router
  // processes (several routers on one worker, a restarted router meeting its predecessor's
  // orphaned sessions) never collide on a worker. 0: drawn at random (24 bits).
  uint32_t instance_id = 0;
  // Refresh the expensive parts of the snapshot (policy state, estimates) every N steps
  // (and whenever the batch empties); the router binary uses 32, the simulator 1024.
  int32_t snapshot_every_steps = 1;
  // Hand a step's new tokens to the requests' sinks while the next step's verify call computes
  // (on the side thread) instead of before that call: a hand-off per request (a queue push and
  // a wake-up of its stream handler) then stays off the critical path between two verifies.
  // Only when the step has tokens for two requests or more (one hand-off costs about what
  // waking the side thread does). A request's events keep their order, and final events (and
  // every event outside a decode step's results) are delivered at once; deferred tokens reach
  // their clients one planning phase later. The router binary turns it on.
  bool defer_token_events = false;
  // Report a decode step (the step observer, the /server_info snapshot) while the next step's
  // verify call computes instead of before the next step is planned: both touch memory the
  // workers' forwards have pushed out of the caches (Prometheus series, the snapshot's JSON),
  // tens of microseconds between a verify answer and the next request on a 2-core VM
  // (bench/router/router_step_bench.cc). A step is reported at the latest when a run of the
  // loop follows it without a decode step (before the loop waits for work), so reports keep
  // their order and none is lost; /server_info then lags one step. The router binary turns it on.
  bool defer_step_reports = false;
  // Draft-ahead (router_pipeline.cc): while a step verifies a chain, the drafter already drafts
  // the next step on the hypothesis that the whole chain and the drafter's guess of the
  // target's next token are accepted; the next step uses that draft when the hypothesis held.
  bool pipeline = false;
  // With the pipeline, requests' drafts made ahead also cover up to this many other
  // outcomes of the step being verified (a shorter prefix of the chain accepted, or another
  // token after it), each the drafter's best other choice where the hypothesis might fail; the
  // next step uses whichever held (spec::ProposeItem::alternatives). 0: the hypothesis alone.
  int32_t draft_ahead_alternatives = 0;
  // The same for sampled requests (-1: draft_ahead_alternatives). The drafter's best other
  // choice catches a sampled target's draw less often than a greedy target's token, and each
  // alternative of a sampled request carries its draft distributions.
  int32_t draft_ahead_sampled_alternatives = -1;
  // With the pipeline, how often a step goes against what the learnt verify slowdown says
  // (LatencyModel::verify_slowdown), so that both kinds of verify call stay observed: one step in
  // this many skips drafting ahead where it pays, or drafts ahead where the slowdown says it
  // does not; in the second case rarer still, so that the probes cost at most about 1% of the
  // verify time they slow (kMaxSlowdownProbeShare). 0: never (the slowdown is learnt from
  // whatever steps there are). The router binary uses kDefaultSlowdownProbeSteps.
  int32_t slowdown_probe_steps = 0;
  // Learn what the refitted line misses per batch size (router/batch_residual.h) and price
  // forwards with it: on a CPU a tree of 16 nodes costs ~40% more than a line fitted to chains
  // says.
  bool latency_residual = true;
  // Drafter pools called at once (one thread per pool beyond the first); off for workers that
  // share state between pools, like the simulator's on one virtual clock.
  bool parallel_pool_calls = true;
};

class RouterCore {
 public:
  // Workers, pools and the clock are not owned and must outlive the core. `verifiers`: one
  // or more replicas of the same target model (non-empty).
  RouterCore(RouterOptions options, std::vector<VerifierClient*> verifiers, DrafterPools drafters,
             std::unique_ptr<SpeculationPolicy> policy, LatencyModel latency,
             const Clock* clock);
  RouterCore(RouterOptions options, VerifierClient* verifier, DrafterPools drafters,
             std::unique_ptr<SpeculationPolicy> policy, LatencyModel latency,
             const Clock* clock)
      : RouterCore(std::move(options), std::vector<VerifierClient*>{verifier}, std::move(drafters),
                   std::move(policy), std::move(latency), clock) {}
  ~RouterCore();
  RouterCore(const RouterCore&) = delete;
  RouterCore& operator=(const RouterCore&) = delete;

  // Reads the workers' Info (KV blocks, block size, vocab, max draft tokens). Must succeed
  // for at least one verifier replica before Submit accepts anything (the others are probed
  // from the loop until they answer); an unreachable drafter only disables that pool's cap.
  absl::Status Init();

  // Queues a request. INVALID_ARGUMENT for a bad request (empty prompt, token out of vocab,
  // max_tokens < 1, stop strings without a detokenizer, never fits the KV cache),
  // RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE after StopAccepting,
  // FAILED_PRECONDITION before Init.
  absl::StatusOr<RequestId> Submit(GenerateRequest request, EventSink sink);
  // Cancels a queued or running request: it gets a final kCancelled event and its worker
  // sessions are released at the next step. NOT_FOUND when it is unknown or finished.
  absl::Status Cancel(RequestId id);

  // One step of the loop (see the file comment). Returns false when there was nothing to do.
  bool RunStep();
  // Reports the decode step RouterOptions::defer_step_reports held back, if any: the loop
  // calls it as it stops (a run of RunStep without a decode step does so otherwise).
  void FlushReport();
  // Blocks until there is work or `timeout` passes; true if there is work.
  bool WaitForWork(absl::Duration timeout);
  // New Submits get UNAVAILABLE; queued and running requests still complete (drain).
  void StopAccepting();
  // Finishes every queued and running request with `status` (kError) at once; for shutdown
  // after a drain timed out. Loop thread only.
  void AbortAll(const absl::Status& status);
  bool Idle() const;

  ServerInfo Snapshot() const;
  // Replica set changes from discovery (router/main.cc re-resolves dns:/// names): an added
  // verifier is probed and then takes new requests; a removed one has its requests moved to
  // the others (re-prefilled there, as when a replica fails) and is never used again. Clients
  // are not owned and must outlive the core, removed ones included. Thread-safe; applied at
  // the start of the next step.
  void UpdateVerifierReplicas(std::vector<VerifierClient*> added, std::vector<VerifierClient*> removed);
  uint32_t instance_id() const { return instance_id_; }
  static constexpr int kSequenceBits = 40;

 private:
  struct Active;
  struct StepPlan;
  struct AheadCall;
  struct Waiting {
    RequestId id = 0;
    GenerateRequest request;
    EventSink sink;
    int32_t blocks = 0;
    double submitted_at = 0;  // clock time of Submit
    int replica = -1;         // the verifier replica admission reserved its blocks on
  };
  // The verify call of one replica in a decode step.
  struct ReplicaCall {
    int replica = -1;
    std::vector<size_t> members;  // indices into StepPlan::batch
    absl::StatusOr<spec::VerifyResponse> response = absl::UnknownError("not called");
    double wall_seconds = 0;
    double context_tokens = 0;  // for the latency model: context read and tokens fed
    double fed_tokens = 0;
  };

  int32_t BlocksFor(const GenerateRequest& r) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // New requests, ready for their first prefill on the replica admission chose.
  std::vector<Active*> StartAdmitted(std::vector<Waiting> admitted);
  // Failover (router_failover.cc).
  void ProbeReplicas();
  // Applies UpdateVerifierReplicas' pending changes (loop thread).
  void ApplyReplicaChanges();
  // Gives requests that lost their replica a new one (appended to `to_prefill`), or fails
  // those that waited failover_wait_seconds.
  void PlaceDisplaced(std::vector<Active*>* to_prefill);
  // Prefills (or re-prefills, with the whole history) `requests` on their replicas, one call
  // per replica, replicas in parallel.
  void PrefillOnReplicas(const std::vector<Active*>& requests, StepStats* stats);
  // A replica's call failed: it is marked down and `requests` (its in that call) are moved off
  // it, to be re-prefilled elsewhere.
  void ReplicaFailed(int replica, const absl::Status& status, const std::vector<Active*>& requests);
  void Displace(Active& r);
  absl::Duration CallTimeout(double predicted_seconds, double scale) const;
  bool DecodeStep(StepStats* stats);  // false when no request was ready to decode
  // DecodeStep's named steps, in order (router_step.cc).
  // Requests admitted non-speculative that the policy now lets draft (Policy::ResumeSpeculation).
  void ResumeSpeculation(const std::vector<Active*>& ready);
  void ReconsiderPools(const std::vector<Active*>& ready, int32_t max_k);
  // The most draft tokens worth proposing for r, once `more_tokens` more are committed.
  int32_t UsefulK(const Active& r, int32_t max_k, int32_t more_tokens = 0) const;
  // PolicyRequest::draft_catch_up for `r` with its current pool.
  int32_t DraftCatchUp(const Active& r) const;
  // What the policy is told of r: as it is, or once the `assumed_tokens` a draft made ahead
  // assumes are committed, r's drafter holding them (router_decide_ahead.cc); its history is
  // r's as it is.
  PolicyRequest PolicyRequestFor(const Active& r, int32_t max_k, int32_t assumed_tokens = 0) const;
  void PlanStep(std::vector<Active*> ready, StepPlan* plan, StepStats* stats);
  // Decision made ahead (router_decide_ahead.cc): beside a verify call whose every request has
  // a draft made ahead, the policy prices the next step for the outcome those drafts assume;
  // the next step takes that decision if it comes exactly as assumed, else decides itself.
  void PriceNextStepAhead(const StepPlan& plan, const std::vector<AheadCall>& ahead);
  std::vector<ProposalChoice> DecideProposals(const PolicyInput& input, StepStats* stats);
  void Draft(StepPlan* plan, StepStats* stats);
  // One pool's Propose in a step: built and applied on the loop thread, called beside the
  // other pools' (router_step.cc).
  struct PoolCall {
    std::string pool;
    std::vector<size_t> members;  // indices into StepPlan::batch
    std::vector<spec::ProposeItem> items;
    std::vector<int32_t> ctx, depth;  // for the latency model
    double catch_up_tokens = 0;
    absl::Duration timeout;
    absl::StatusOr<spec::ProposeResponse> response = absl::UnknownError("not called");
    double wall_seconds = 0;
  };
  PoolCall BuildPoolCall(const std::string& pool, std::vector<size_t> members, const StepPlan& plan) const;
  void ApplyPoolCall(PoolCall& call, StepPlan* plan);
  // Verifies, with `alongside` (may be empty) running meanwhile: on this thread between sending
  // and reading when the step is one call to a client that overlaps work with it
  // (VerifierClient::OverlapsWorkWithVerify), on the side thread otherwise.
  std::vector<ReplicaCall> VerifyOnReplicas(StepPlan* plan, const std::function<void()>& alongside);
  // Whether the step's verify call will run its side work on this thread while in flight: one
  // replica for the whole batch, and a client that overlaps work with its call.
  bool VerifyOverlapsWork(const StepPlan& plan) const;
  // Draft-ahead (router_pipeline.cc).
  // Whether a chain of `depth` should verify one token less, keeping the last token of the
  // request's draft made ahead back as the guess the next step's draft-ahead builds on.
  bool KeepsPipelineGoing(const Active& r, int32_t depth) const;
  bool UseDraftMadeAhead(size_t i, StepPlan* plan);
  // Splits the drafter's guess of the target's next token off a chain drafted one deeper.
  void KeepGuess(size_t i, StepPlan* plan);
  // Whether request r's chain of k is drafted one deeper, for a draft made ahead to build on:
  // only where the Propose such drafts save outweighs the extra level and what of the draft
  // made ahead outlasts the verify call (predicted at `verify_seconds`).
  // `slowdown_seconds`: this request's share of what drafting ahead beside the verify call is
  // learnt to add to it (VerifySlowdown).
  bool DraftGuessPays(const Active& r, int32_t k, int32_t max_k, double verify_seconds,
                      double slowdown_seconds) const;
  // What drafting ahead beside the planned step's verify call is learnt to add to it, split
  // evenly over its requests (0 on a probe step that drafts ahead whatever it costs).
  double SlowdownShareSeconds(const StepPlan& plan, double verify_seconds) const;
  // Whether this step's drafts made ahead (expected to save `saving_seconds` of the next
  // step's Propose calls) are made, against what they are learnt to add to the verify call;
  // a probe step decides the other way (RouterOptions::slowdown_probe_steps).
  bool DraftAheadOutweighsSlowdown(const StepPlan& plan, double saving_seconds, double verify_seconds);
  // Whether this step is a probe of the verify slowdown.
  bool ProbesSlowdown();
  // The latency model's figure for the verify call of the planned step: each request feeds its
  // pending token and its planned nodes, or (`drafted`) the draft tokens it really has.
  double PlannedVerifySeconds(const StepPlan& plan, bool drafted) const;
  // The chance that request r's chain of k and the guess after it all land: its acceptance
  // estimate to the power k + 1.
  double ChainAndGuessLand(const Active& r, int32_t k) const;
  // How many other outcomes r's draft made ahead covers, its hypothesis `assumed` tokens long
  // (RouterOptions::draft_ahead_alternatives, or draft_ahead_sampled_alternatives; at most one
  // a position).
  int32_t AlternativesAhead(const Active& r, int32_t assumed) const;
  // The chance that r's draft made ahead after a chain of k, covering `alternatives` other
  // outcomes, is used: the hypothesis, or one of the alternatives where it fails
  // (LatencyModel::DraftAheadLands).
  double DraftAheadLands(const Active& r, int32_t k, int32_t alternatives) const;
  // What r's draft made ahead is predicted to cost its pool's drafter beside the verify call
  // (LatencyModel::ResolveAhead): `fed` tokens fed, then a chain of `depth` after `context`
  // tokens, and as many more as its `alternatives`.
  double AheadDraftSeconds(const Active& r, int32_t context, int32_t depth, int32_t alternatives, int32_t fed) const;
  // A draft made ahead as priced: the alternatives it covers, the chance it is used and what
  // of it outlasts the verify call.
  struct DraftAheadOption {
    int32_t alternatives = 0;
    double lands = 0;
    double outlasting = 0;
    // What it is worth when a hit spares `saved_seconds`: what it saves less what it delays.
    double Net(double saved_seconds) const { return lands * saved_seconds - outlasting; }
  };
  // r's draft made ahead after a chain of k and a hypothesis `assumed` tokens long, a chain of
  // `depth` after `context` tokens, beside a verify call of `verify_seconds`: with the
  // alternatives the options allow (AlternativesAhead) or with none, whichever nets more when
  // a hit spares `saved_seconds`. Each alternative is one more chain in the drafter's forwards:
  // where drafting costs nearly what verifying does (a target's own weights in 8 bits), the
  // chains of four alternatives outlast the verify call the hypothesis alone would hide in,
  // for misses a drafter that good rarely makes.
  DraftAheadOption BestDraftAhead(const Active& r, int32_t k, int32_t assumed, int32_t context, int32_t depth,
                                  double verify_seconds, double saved_seconds) const;
  std::vector<AheadCall> PlanDraftAhead(const StepPlan& plan);
  // Keeps the members of a pool's call for drafts made ahead whose gains outweigh what the
  // call as a whole outlasts a verify call of `verify_seconds` by: of the runs of them taken
  // largest gains first, the one that nets the most (members keep their order). Each request is first
  // judged on its own chains; together they are one call, and where drafting beside the
  // verifier is slow, four requests' chains can outlast a call that each alone would fit in.
  // Returns what the kept members net (0, and no members, where none pays).
  double KeepMembersThatPay(AheadCall* call, double verify_seconds) const;
  // The calls of a draft-ahead (or a prefill's drafts), one per pool, each with its timeout.
  std::vector<AheadCall> TimedAheadCalls(std::map<std::string, AheadCall> by_pool) const;
  void DraftAhead(std::vector<AheadCall>* calls);
  void ApplyDraftAhead(std::vector<AheadCall>& calls, double verify_compute, StepStats* stats);
  void ObserveAheadCall(const AheadCall& call);  // feeds the draft-time correction
  // The drafters' side of a prefill (router_prefill_drafts.cc): while the verifier prefills new
  // requests, their pools prefill the same history and, with the pipeline, draft the first
  // decode step for the hypothesis that the target's first token is the drafter's.
  void ChooseSpeculation(Active& r, int32_t max_k);
  void NoteRecentChoice(const std::vector<Active*>& ready, const std::vector<size_t>& run,
                        const std::vector<ProposalChoice>& decided);
  std::vector<AheadCall> PlanPrefillDrafts(const std::vector<Active*>& requests, int32_t max_k);
  void ApplyPrefillDrafts(std::vector<AheadCall>& calls, double prefill_seconds, StepStats* stats);
  StepOutcome ApplyResults(const StepPlan& plan, std::vector<ReplicaCall>& calls, StepStats* stats);
  void ObserveStep(const StepPlan& plan, const std::vector<ReplicaCall>& calls, StepOutcome outcome,
                   StepStats* stats);
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends tokens one by one, stopping at the first stop condition.
  void AppendTokens(Active& r, absl::Span<const int32_t> tokens, StreamEvent* event);
  void Finish(Active& r, FinishReason reason, absl::Status status, StreamEvent* event);
  // Delivers `event` now, after any deferred events (so a request's events stay in order).
  void Emit(Active& r, StreamEvent& event);
  // A decode step's tokens for `r`: deferred until the next verify call is in flight when
  // RouterOptions::defer_token_events is set and the event is not final, else Emit.
  void EmitStepTokens(Active& r, StreamEvent& event);
  // Delivers the deferred events in the order they were made.
  void FlushEvents();
  // Tells the workers the sessions of finished requests are gone (the verifiers on this thread,
  // the drafters on the side thread meanwhile), then drops those requests.
  void ReleaseAndReap();
  void ReleaseDrafterSessions();  // the drafters' share of ReleaseAndReap
  void UpdateSnapshot(const StepStats* stats);
  // What a run of the loop reports: its decode step's stats to the step observer (when it
  // verified something) and the snapshot.
  // What a decode step's decision expected, for the estimated-goodput metric: the requests that
  // ran, as goodput items at the step's estimates, and their depths. Priced when the step is
  // reported (Report): where reports are held back, beside the next verify call rather than on
  // the way to the step's own calls.
  struct GoodputEstimate {
    std::vector<GoodputItem> items;
    std::vector<int32_t> k;
    int32_t max_k = 0;
  };
  struct StepReport {
    StepStats stats;
    bool decoded = false;   // a decode step ran: the snapshot keeps its overhead
    bool observed = false;  // it verified something: the step observer hears of it
    std::optional<GoodputEstimate> goodput;  // priced into stats.estimated_goodput
  };
  void Report(StepReport& report);

  const RouterOptions options_;
  VerifierReplicas replicas_;  // loop thread only (admission runs on it, under mu_)
  const DrafterPools drafters_;
  std::vector<std::string> pool_names_;
  std::unique_ptr<SpeculationPolicy> policy_;
  LatencyModel latency_;
  const Clock* const clock_;
  AcceptanceTracker tracker_;
  TreeAcceptance tree_acceptance_;
  ShapeCalibration calibration_;
  OnlineForwardFit target_fit_;  // the target's latency coefficients, refitted online
  // Pipeline: steps since the last probe of the verify slowdown (LatencyModel::verify_slowdown).
  int64_t steps_since_slowdown_probe_ = 0;
  bool drafting_ahead_paid_ = true;  // what the last step without a probe decided
  SideThread side_thread_;  // runs the draft-ahead and deferred events beside the verify call
  // The last step's verify ran its side work on the loop thread while in flight: a single
  // request's tokens then wait for the next call too, which costs no hand-off.
  bool verify_overlaps_work_ = false;
  // For StepStats::between_steps_seconds: when the last decode step's wall time ended, and
  // whether the run before this one decoded (the loop then runs the next at once), and so
  // whether this run's step follows it back to back.
  double previous_step_end_ = 0;
  bool previous_run_decoded_ = false;
  bool follows_decode_step_ = false;
  // Deferred step tokens (EmitStepTokens): requests not finished when deferred, so alive until
  // delivered (every path that finishes a request emits, and Emit flushes first).
  std::vector<std::pair<Active*, StreamEvent>> deferred_events_;
  // The last decode step's report, held back until the next verify call is in flight
  // (RouterOptions::defer_step_reports); ObserveStep sets step_observed_ for the running step.
  std::optional<StepReport> deferred_report_;
  std::optional<GoodputEstimate> step_goodput_;  // this run's decode step's, for its report
  bool step_observed_ = false;
  int64_t draft_ahead_used_ = 0;
  int64_t decisions_made_ahead_ = 0;
  // The next step's decision priced beside this step's verify call (none: decision null), what
  // its requests were assumed to be (their histories left out) and the tokens each was assumed
  // to have gained.
  struct PricedAhead {
    std::unique_ptr<PricedProposals> decision;
    std::vector<PolicyRequest> requests;
    std::vector<std::vector<int32_t>> gained;
    int32_t max_k = 0;
  };
  PricedAhead priced_ahead_;
  int64_t draft_ahead_dropped_ = 0;
  int64_t draft_ahead_alternatives_held_ = 0;
  double draft_seconds_total_ = 0;
  double hidden_draft_seconds_total_ = 0;

  mutable Mutex mu_;
  CondVar work_cv_;  // signalled when waiting_/cancels_ gain entries
  std::deque<Waiting> waiting_ ABSL_GUARDED_BY(mu_);
  std::vector<RequestId> cancels_ ABSL_GUARDED_BY(mu_);
  std::vector<Waiting> cancelled_waiting_ ABSL_GUARDED_BY(mu_);
  std::set<RequestId> live_ ABSL_GUARDED_BY(mu_);
  uint32_t instance_id_ = 0;  // fixed at construction
  RequestId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<VerifierClient*> replicas_to_add_ ABSL_GUARDED_BY(mu_);
  std::vector<VerifierClient*> replicas_to_remove_ ABSL_GUARDED_BY(mu_);
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  // The last step could do nothing but wait for a verifier replica: WaitForWork then waits
  // (for a probe) instead of returning at once.
  bool stalled_ ABSL_GUARDED_BY(mu_) = false;
  int32_t running_count_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t total_blocks_ ABSL_GUARDED_BY(mu_) = 0;  // the largest replica's KV
  int32_t block_size_ ABSL_GUARDED_BY(mu_) = 16;
  int32_t vocab_size_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t reserved_blocks_ ABSL_GUARDED_BY(mu_) = 0;  // over all replicas (snapshots)
  int32_t max_k_ ABSL_GUARDED_BY(mu_) = 0;
  ServerInfo snapshot_ ABSL_GUARDED_BY(mu_);
  std::deque<double> overheads_ ABSL_GUARDED_BY(mu_);

  // Loop-thread state.
  // The verifier's context in tokens (0: unknown, no limit). Written by Init before it sets
  // initialized_ (under mu_), read-only afterwards.
  int32_t max_context_ = 0;
  // The deepest proposal the policy chose for a speculative request in the last step that had
  // one (-1: none yet, 0: plain decoding), and whether it was a tree: what a new request's pool
  // drafts during its prefill (router_prefill_drafts.cc).
  int32_t recent_k_ = -1;
  bool recent_tree_ = false;
  std::vector<std::unique_ptr<Active>> running_;
  int64_t steps_ = 0;
  int64_t completed_ = 0;
  std::map<int32_t, int64_t> k_histogram_;
  std::map<int, std::vector<RequestId>> verifier_releases_;  // by replica
  // Probes of down replicas in flight (router_failover.cc), by replica. Declared last: the
  // destructor waits for them before the rest goes.
  std::map<int, std::future<absl::StatusOr<spec::WorkerInfo>>> probes_;
  std::map<std::string, std::vector<RequestId>> drafter_releases_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_ROUTER_CORE_H_
