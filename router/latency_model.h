// The router's model of how long a step takes, after SmartSpec:
//   T_fwd(M, N_context, N_batched) = alpha_M * N_context + gamma_M * N_batched + delta_M
// per model (target and each drafter pool), a small constant per step for model-free
// proposers (n-gram), and a constant per RPC. Loaded from / saved to the JSON file that
// `splitspec profile` writes; an online correction learns from observed step times so that
// a wrong file degrades gracefully instead of steering the policy wrong forever.
//
// Thread-safety: thread-compatible. RouterCore owns one and touches it only from its loop.
#ifndef SPLITSPEC_ROUTER_LATENCY_MODEL_H_
#define SPLITSPEC_ROUTER_LATENCY_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"
#include "router/batch_residual.h"
#include "router/draft_correction.h"
#include "router/verify_slowdown.h"

namespace splitspec::router {

struct ForwardCoefficients {
  double alpha = 0;  // seconds per context token read from the KV cache
  double gamma = 0;  // seconds per token fed to the forward
  double delta = 0;  // seconds per forward (weights, launches)
  double Predict(double n_context, double n_batched) const {
    return alpha * n_context + gamma * n_batched + delta;
  }
};

struct DrafterCost {
  bool model_free = false;      // n-gram & co: constant_seconds per step instead of forwards
  ForwardCoefficients forward;  // for a draft model: one forward per draft depth
  double constant_seconds = 0;
};

// Where the share of missed hypotheses an alternative catches starts (LatencyModel::
// ObserveAlternativeOutcome), greedy and sampled requests each learning their own from there:
// about what the router binary's defaults catch with the bundled pair on code (greedy: four
// alternatives 0.51-0.52, two 0.34-0.35; sampled at temperature 0.8: two, 0.16;
// docs/benchmarks.md). Starting at 0 would price alternatives as useless until one was seen to
// hold, and a request whose hypothesis alone does not pay drafting ahead would never try them.
inline constexpr double kAlternativeRescuePrior = 0.5;
inline constexpr double kSampledAlternativeRescuePrior = 0.15;

class LatencyModel {
 public:
  LatencyModel();  // the built-in default (the A100 7B / 160M figures of configs/latency)

  static absl::StatusOr<LatencyModel> FromJson(const nlohmann::json& json);
  static absl::StatusOr<LatencyModel> Load(const std::string& path);
  nlohmann::json ToJson() const;
  absl::Status Save(const std::string& path) const;

  void set_target(const ForwardCoefficients& c) { target_ = c; }
  // The target's profiled batch shape: per fed-token count n, what a forward measured over the
  // profile's line at n (`splitspec profile`, the file's target.batch_factors). The line
  // cannot follow a forward that is flat while it is bound by weight reads and then rises
  // (a CPU decoding from memory costs the same for 1 to 4 tokens); the shape can. Predictions
  // are the line times the shape (interpolated between profiled sizes, held beyond them), and
  // the online correction and refit learn on top of it. Empty: a shape of 1.
  void set_target_batch_factors(std::map<int32_t, double> factors);
  const std::map<int32_t, double>& target_batch_factors() const { return batch_factors_; }
  double TargetShape(double n_batched) const {
    return batch_shape_.empty() ? 1.0 : batch_shape_.Factor(n_batched);
  }
  // Replaces the pool's entry (its batch shape included).
  void set_drafter(const std::string& pool, const DrafterCost& c) { drafters_[pool] = DrafterEntry{c, {}, {}}; }
  // A draft model's profiled batch shape, as the target's (the file's drafters.NAME.batch_factors):
  // per tokens one draft forward feeds, what it measured over the drafter's line (profiled at
  // one token per request, so by requests; a first forward's catch-up tokens count as fed
  // tokens). A drafter's forward can have a floor at one request or a dip at a tile-sized batch
  // that its line misses, and one multiplicative correction cannot fit both widths of call.
  // Ignored for a pool without an entry; empty: a shape of 1.
  void set_drafter_batch_factors(const std::string& pool, std::map<int32_t, double> factors);
  const std::map<int32_t, double>& drafter_batch_factors(const std::string& pool) const;
  void set_rpc_seconds(double s) { rpc_seconds_ = rpc_file_seconds_ = s; }
  void set_description(std::string d) { description_ = std::move(d); }
  const std::string& description() const { return description_; }

  // Coefficients with the online correction applied. A pool without its own entry uses
  // "default", else the first drafter entry, else a zero-cost model-free drafter.
  ForwardCoefficients EffectiveTarget() const;
  DrafterCost EffectiveDrafter(const std::string& pool) const;
  // The pool's batch shape at a draft forward of `n_batched` tokens (1 without one): the
  // effective drafter's line times this is a forward's predicted time.
  double DraftShape(const std::string& pool, double n_batched) const;
  double RpcSeconds() const { return rpc_seconds_; }

  // Corrected predictions.
  double TargetSeconds(double n_context, double n_batched) const;
  // The file's own prediction (its line times its shape), which nothing observed moves: a
  // yardstick for comparing calls made hundreds of steps apart (router/verify_slowdown.h).
  double FileTargetSeconds(double n_context, double n_batched) const {
    return target_.Predict(n_context, n_batched) * TargetShape(n_batched);
  }
  // Draft time for one Propose call: requests i with context ctx[i] and depth k[i]; a draft
  // model runs max(k) forwards, request i taking part in the first k[i] of them.
  double DraftSeconds(const std::string& pool, absl::Span<const int32_t> ctx,
                      absl::Span<const int32_t> k) const;

  // Online correction: each target observation moves a multiplicative scale (EMA, clamped to
  // [0.1, 10]) towards observed / raw prediction (the file's line times its shape); a pool's
  // draft calls fit a per-call time and a scale (router/draft_correction.h); the RPC
  // overhead is an EMA of what the step's wall time leaves after the workers' compute.
  void ObserveTarget(double n_context, double n_batched, double observed_seconds);
  // `first_forward_tokens`: tokens the drafter's first forward really fed (its catch-up on
  // newly committed tokens, a whole history for a lazy prefill); predictions assume one per
  // request, so the correction must not mistake catch-up work for a slow drafter. A call that
  // fed more than a decode step's tokens (k + 2 a request) is not learnt from at all: its
  // first forward is a prefill, which the line does not price.
  void ObserveDraft(const std::string& pool, absl::Span<const int32_t> ctx,
                    absl::Span<const int32_t> k, double observed_seconds,
                    double first_forward_tokens = -1);
  // The same for a draft made ahead (router_pipeline.cc), which runs while the target verifies:
  // beside the verifier it may run slower than alone (on a 2-core host, the 8-bit self-draft's
  // drafts made ahead for four requests took 2.8x the Proposes of the serial steps), so it
  // has a correction of its own, which starts from the pool's serial one. Serial Proposes do
  // not move it, nor drafts made ahead the serial one.
  void ObserveDraftAhead(const std::string& pool, absl::Span<const int32_t> ctx, absl::Span<const int32_t> k,
                         double observed_seconds, double first_forward_tokens);
  void ObserveRpcOverhead(double seconds_per_rpc);
  double target_scale() const { return target_scale_; }
  // The file's target line at the observed level (its coefficients x target_scale()): the
  // prior of the online refit (router/online_fit.h).
  ForwardCoefficients ScaledFileTarget() const {
    return {target_.alpha * target_scale_, target_.gamma * target_scale_, target_.delta * target_scale_};
  }
  // Coefficients refitted online from observed steps (router/online_fit.h), which are divided
  // by TargetShape first: once set, target predictions are this line times the shape (the
  // multiplicative correction no longer applies).
  void SetRefitTarget(const ForwardCoefficients& c) { refit_target_ = c; }
  // With a refit, what the line misses per batch size (router/batch_residual.h) is learnt from
  // the same observations and multiplies target predictions. On by default; off, predictions
  // are the refit's line.
  void set_batch_residual(bool on);
  const BatchResidual& batch_residual() const { return residual_; }
  // Pipeline (router_pipeline.cc): whether drafts are made ahead while the target verifies.
  // Goodput then prices a step's drafting as the part the verify call cannot hide, per depth
  // (router/goodput.h).
  void set_pipeline(bool on) { pipeline_ = on; }
  bool pipeline() const { return pipeline_; }
  // The share of draft compute steps actually waited for, the rest having run while the
  // verifier computed: an EMA of observed steps, 1 without the pipeline. Reported (Summary);
  // the analytical policy scales its draft cost by it.
  void ObserveDraftExposure(double exposed_share);
  double draft_exposure() const { return draft_exposure_; }
  // How much longer a verify call takes while drafts are made ahead beside it
  // (router/verify_slowdown.h): each verify call of the pipeline, beside drafts or not, against
  // FileTargetSeconds for its shape. verify_slowdown() is the share it prices (0 below
  // VerifySlowdown::kPricedFrom or while unknown): RouterCore weighs a step's drafts made ahead
  // against it, and goodput adds it to a pipelined step's exposed draft time.
  void ObserveVerify(bool beside_drafts, double n_context, double n_batched, double observed_seconds) {
    verify_slowdown_.Observe(beside_drafts, observed_seconds, FileTargetSeconds(n_context, n_batched));
  }
  double verify_slowdown() const { return verify_slowdown_.Priced(); }
  const VerifySlowdown& verify_slowdown_estimate() const { return verify_slowdown_; }
  // Drafts made ahead that also cover other outcomes (RouterOptions::draft_ahead_alternatives):
  // how many each covers, for greedy and for sampled requests, and how often one of them holds
  // where the hypothesis failed: an EMA of observed misses from kAlternativeRescuePrior
  // (kSampledAlternativeRescuePrior), one for greedy requests and one for sampled ones (a
  // sampled target token is a draw, which the drafter's best other choice catches less often
  // than a greedy target's). Each alternative is priced as one more chain in the draft made
  // ahead.
  void set_draft_ahead_alternatives(int32_t greedy, int32_t sampled) {
    draft_ahead_alternatives_[0] = greedy;
    draft_ahead_alternatives_[1] = sampled;
  }
  void set_draft_ahead_alternatives(int32_t n) { set_draft_ahead_alternatives(n, n); }
  int32_t draft_ahead_alternatives(bool greedy) const { return draft_ahead_alternatives_[greedy ? 0 : 1]; }
  void ObserveAlternativeOutcome(bool held, bool greedy);
  double alternative_rescue(bool greedy) const { return alternative_rescue_[greedy ? 0 : 1]; }
  // The chance that a greedy (or sampled) request's draft made ahead is used, when its
  // hypothesis holds with chance `hypothesis`: that chance itself when it covers no other
  // outcome, else what the alternatives catch of its misses besides.
  double DraftAheadLands(double hypothesis, bool greedy, bool with_alternatives) const {
    return with_alternatives ? hypothesis + (1 - hypothesis) * alternative_rescue(greedy) : hypothesis;
  }
  const std::optional<ForwardCoefficients>& refit_target() const { return refit_target_; }
  // A pool's draft-time correction (router/draft_correction.h): predicted call time =
  // draft_call_seconds + draft_scale * the line. A pool never observed follows the target's
  // correction, with no per-call time.
  double draft_scale(const std::string& pool) const;
  double draft_call_seconds(const std::string& pool) const;
  // A pool's cost entry and online scale, looked up once: GoodputModel prices many candidate
  // steps against the same model, and the lookups (string keys) were most of their cost.
  struct ResolvedDrafter {
    const DrafterCost* raw = nullptr;     // nullptr: no entry for it and no default
    const BatchResidual* shape = nullptr;  // its batch shape (empty: 1); set with raw
    double scale = 1.0;                   // draft_scale(pool)
    double call_seconds = 0;              // draft_call_seconds(pool)
    double Shape(double n_batched) const {
      return shape == nullptr || shape->empty() ? 1.0 : shape->Factor(n_batched);
    }
  };
  ResolvedDrafter Resolve(const std::string& pool) const;
  // A pool's entry with the correction of its drafts made ahead (ObserveDraftAhead), or its
  // serial one until one is observed.
  ResolvedDrafter ResolveAhead(const std::string& pool) const;
  // The pool's drafts-made-ahead scale and per-call time, as draft_scale and draft_call_seconds.
  double draft_ahead_scale(const std::string& pool) const { return ResolveAhead(pool).scale; }
  double draft_ahead_call_seconds(const std::string& pool) const { return ResolveAhead(pool).call_seconds; }
  // DraftSeconds(pool, ...) for a resolved pool: the same figure. `first_forward_tokens`: as
  // for ObserveDraft, tokens the first forward feeds when that is more than one per request.
  double DraftSeconds(const ResolvedDrafter& drafter, absl::Span<const int32_t> ctx,
                      absl::Span<const int32_t> k, double first_forward_tokens = -1) const;
  // How far observed target steps are from the file's coefficients (the multiplicative
  // correction, or the refit's ratio to the file at a typical step).
  double TargetCorrection() const;

  // Short human-readable summary for GetServerInfo.
  std::string Summary() const;

 private:
  struct DrafterEntry {
    DrafterCost cost;
    std::map<int32_t, double> batch_factors;  // as in the file
    BatchResidual shape;                      // batch_factors, interpolated
  };
  const DrafterEntry* FindDrafter(const std::string& pool) const;
  // The drafter's line times its shape, summed over the call's forwards (no online scale).
  static double RawDraftSeconds(const ResolvedDrafter& drafter, absl::Span<const int32_t> ctx,
                                absl::Span<const int32_t> k, double first_forward_tokens = -1);

  std::string description_;
  ForwardCoefficients target_;
  std::map<std::string, DrafterEntry> drafters_;
  double rpc_file_seconds_ = 0;
  double rpc_seconds_ = 0;
  double target_scale_ = 1.0;
  std::optional<ForwardCoefficients> refit_target_;
  bool use_residual_ = true;
  BatchResidual residual_;
  std::map<int32_t, double> batch_factors_;  // as in the file
  BatchResidual batch_shape_;                // batch_factors_, interpolated
  bool pipeline_ = false;
  double draft_exposure_ = 1.0;
  VerifySlowdown verify_slowdown_;
  int32_t draft_ahead_alternatives_[2] = {0, 0};  // greedy, sampled
  double alternative_rescue_[2] = {kAlternativeRescuePrior, kSampledAlternativeRescuePrior};  // greedy, sampled
  std::map<std::string, DraftCorrection> draft_corrections_;
  std::map<std::string, DraftCorrection> ahead_draft_corrections_;  // drafts made ahead
  nlohmann::json fit_info_;  // carried through load/save untouched
};

// Least-squares fit of T = alpha * n_context + gamma * n_batched + delta.
struct ForwardSample {
  double n_context = 0;
  double n_batched = 0;
  double seconds = 0;
};
struct ForwardFit {
  ForwardCoefficients coefficients;
  double r2 = 0;                    // coefficient of determination
  double worst_relative_error = 0;  // max |pred - obs| / obs over the samples
};
// INVALID_ARGUMENT with fewer than 3 samples or a singular design (e.g. n_context never
// varies); coefficients are not forced positive (a negative one tells you the grid is bad).
absl::StatusOr<ForwardFit> FitForward(absl::Span<const ForwardSample> samples);

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_LATENCY_MODEL_H_
