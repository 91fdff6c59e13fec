// Acceptance-rate estimators: how likely the target is to accept the next draft token.
//
// Every estimator works from verifications (k drafted, V accepted). Treating each drafted
// token as a Bernoulli trial that is only observed up to the first rejection, the maximum
// likelihood estimate of the per-token acceptance over a set of verifications is
//   b = sum V / (sum V + sum [V < k])
// (the on-the-fly paper's formula), capped at 0.98 so that l(b, k) and the analytical
// window stay finite and a streak of full accepts cannot promise certainty.
//  - WindowEstimator: SmartSpec's moving window over the last W steps, pooled: the MLE over
//    every verification in the window. (The mean of per-step rates is biased low whenever a
//    step holds few requests: one request drafting k = 3 at a = 0.7 averages 0.54.)
//  - EmaEstimator: exponential moving average of the steps' rates.
//  - MleEstimator: the pooled MLE over the last h verifications (on-the-fly).
// AcceptanceTracker keeps one estimate globally, one per drafter pool, and one per request
// and pool whose prior is the pool's estimate (worth `request_prior_weight` trials), so a
// new request starts from what the pool has seen. The global and pool estimates likewise
// count initial_acceptance as `request_prior_weight` verifications (one unlucky first step
// must not read as "acceptance 0" and switch speculation off for good).
//
// Thread-safety: thread-compatible (owned by the router's loop thread).
#ifndef SPLITSPEC_ROUTER_ACCEPTANCE_H_
#define SPLITSPEC_ROUTER_ACCEPTANCE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/spec/worker_api.h"
#include "nlohmann/json.hpp"

namespace splitspec::router {

struct Verification {
  int32_t proposed = 0;  // draft tokens sent (k > 0)
  int32_t accepted = 0;  // of those accepted, 0..proposed
};

constexpr double kAcceptanceCap = 0.98;

// successes / (successes + failures), capped; `fallback` when there were no trials.
double CappedMle(double successes, double failures, double cap, double fallback);
// The MLE over a set of verifications (nullopt when none drafted anything).
std::optional<double> MleOf(absl::Span<const Verification> v, double cap = kAcceptanceCap);

class AcceptanceEstimator {
 public:
  virtual ~AcceptanceEstimator() = default;
  // One call per step with that step's verifications (steps with none are ignored).
  virtual void ObserveStep(absl::Span<const Verification> step) = 0;
  virtual std::optional<double> Estimate() const = 0;
  // An estimator in the same state that learns apart from this one.
  virtual std::unique_ptr<AcceptanceEstimator> Clone() const = 0;
};

class WindowEstimator : public AcceptanceEstimator {
 public:
  WindowEstimator(int32_t window_steps, double cap) : window_(window_steps), cap_(cap) {}
  void ObserveStep(absl::Span<const Verification> step) override;
  std::optional<double> Estimate() const override;

  std::unique_ptr<AcceptanceEstimator> Clone() const override { return std::make_unique<WindowEstimator>(*this); }
 private:
  struct StepCounts {
    double accepted = 0;  // accepted draft tokens
    double rejections = 0;  // verifications that stopped before their last draft token
  };
  int32_t window_;
  double cap_;
  std::deque<StepCounts> steps_;
};

class EmaEstimator : public AcceptanceEstimator {
 public:
  EmaEstimator(double alpha, double cap) : alpha_(alpha), cap_(cap) {}
  void ObserveStep(absl::Span<const Verification> step) override;
  std::optional<double> Estimate() const override { return value_; }

  std::unique_ptr<AcceptanceEstimator> Clone() const override { return std::make_unique<EmaEstimator>(*this); }
 private:
  double alpha_;
  double cap_;
  std::optional<double> value_;
};

class MleEstimator : public AcceptanceEstimator {
 public:
  MleEstimator(int32_t history, double cap) : history_(history), cap_(cap) {}
  void ObserveStep(absl::Span<const Verification> step) override;
  std::optional<double> Estimate() const override;

  std::unique_ptr<AcceptanceEstimator> Clone() const override { return std::make_unique<MleEstimator>(*this); }
 private:
  int32_t history_;
  double cap_;
  std::deque<Verification> last_;
};

struct EstimatorConfig {
  std::string kind = "window";  // window | ema | mle
  int32_t window = 64;          // steps, for window (at one request per step, 64 verifications)
  double ema_alpha = 0.2;       // for ema
  int32_t history = 32;         // verifications, for mle
  double cap = kAcceptanceCap;
};
absl::StatusOr<std::unique_ptr<AcceptanceEstimator>> MakeEstimator(const EstimatorConfig& c);

struct AcceptanceConfig {
  EstimatorConfig global;             // used for the global and the per-pool estimates
  int32_t request_history = 8;        // per-request MLE over this many verifications
  double request_prior_weight = 4.0;  // pseudo-trials of the pool estimate in a request's
  double initial_acceptance = 0.6;    // before anything was observed
  // A global / pool estimate that saw no verification for this many steps drifts back to
  // initial_acceptance over as many steps again. Without it a policy that stopped
  // speculating because of a pessimistic estimate would never collect the data to revise it
  // (and SmartSpec's prefill disabling would lock itself off).
  int32_t stale_after_steps = 8;
};
// Reads the optional "acceptance" object of a policy config: {"estimator": "window"|"ema"|
// "mle", "window": N, "ema_alpha": x, "history": N, "request_history": N,
// "request_prior_weight": x, "initial_acceptance": x, "stale_after_steps": N}.
absl::StatusOr<AcceptanceConfig> ParseAcceptanceConfig(const nlohmann::json& policy_config);

class AcceptanceTracker {
 public:
  struct Observation {
    spec::RequestId id = 0;
    std::string pool;
    Verification v;
  };

  // A copy learns apart from its original: what the estimates would be after a step that has
  // not happened (RouterCore prices the next step ahead for its drafts' assumed outcome).
  explicit AcceptanceTracker(AcceptanceConfig config = {});

  void ObserveStep(const std::vector<Observation>& step);
  void Forget(spec::RequestId id);

  double Global() const;
  double Pool(const std::string& pool) const;  // falls back to Global()
  double Request(spec::RequestId id, const std::string& pool) const;
  int64_t PoolVerifications(const std::string& pool) const;
  int64_t RequestVerifications(spec::RequestId id, const std::string& pool) const;

  // Tokens per speculated request-step (accepted drafts + the target's token), lifetime.
  double MeanAcceptLength() const;
  std::map<std::string, double> MeanAcceptLengthByPool() const;

 private:
  struct Totals {
    int64_t steps = 0;
    int64_t tokens = 0;
  };
  // An estimator owned by the tracker that a copy of the tracker clones.
  class OwnedEstimator {
   public:
    OwnedEstimator() = default;
    explicit OwnedEstimator(std::unique_ptr<AcceptanceEstimator> e) : e_(std::move(e)) {}
    OwnedEstimator(const OwnedEstimator& o) : e_(o.e_ ? o.e_->Clone() : nullptr) {}
    OwnedEstimator& operator=(const OwnedEstimator& o) {
      if (this != &o) e_ = o.e_ ? o.e_->Clone() : nullptr;
      return *this;
    }
    OwnedEstimator(OwnedEstimator&&) = default;
    OwnedEstimator& operator=(OwnedEstimator&&) = default;
    explicit operator bool() const { return e_ != nullptr; }
    AcceptanceEstimator* operator->() const { return e_.get(); }

   private:
    std::unique_ptr<AcceptanceEstimator> e_;
  };
  double Relax(std::optional<double> estimate, int64_t idle_steps, int64_t verifications) const;
  AcceptanceConfig config_;
  OwnedEstimator global_;
  std::map<std::string, OwnedEstimator> pools_;
  std::map<std::string, int64_t> pool_counts_;
  int64_t step_ = 0;
  int64_t global_last_step_ = 0;
  std::map<std::string, int64_t> pool_last_step_;
  std::map<std::pair<spec::RequestId, std::string>, std::deque<Verification>> requests_;
  std::map<std::pair<spec::RequestId, std::string>, int64_t> request_counts_;
  Totals global_totals_;
  std::map<std::string, Totals> pool_totals_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_ACCEPTANCE_H_
