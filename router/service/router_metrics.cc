// Router metrics fed from RouterCore's hooks (see router_metrics.h).
#include "router/service/router_metrics.h"

#include <algorithm>
#include <utility>

#include "common/metrics/server_info.h"

namespace splitspec::router {
namespace {

metrics::RequestStatus StatusOf(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return metrics::RequestStatus::kLength;
    case FinishReason::kEos:
    case FinishReason::kStopString: return metrics::RequestStatus::kStop;
    case FinishReason::kCancelled: return metrics::RequestStatus::kCancelled;
    default: return metrics::RequestStatus::kError;
  }
}

}  // namespace

// Per-request timing, owned by the wrapped sink and touched only on the loop thread.
struct RouterMetrics::RequestClock {
  double arrival = 0;
  double last_token = -1;  // clock time of the latest token, < 0 before the first
};

absl::StatusOr<std::unique_ptr<RouterMetrics>> RouterMetrics::Create(metrics::MetricsRegistry& registry,
                                                                     const RouterMetricsOptions& options,
                                                                     const Clock* clock) {
  std::unique_ptr<RouterMetrics> m(new RouterMetrics());
  m->clock_ = clock;
  m->tier_refresh_seconds_ = options.tier_refresh_seconds;
  std::vector<std::string> names = options.pools;
  if (names.empty()) names.push_back("none");
  for (const std::string& name : names) {
    metrics::RouterSpecMetricsOptions spec_options;
    spec_options.pool = name;
    spec_options.policy = options.policy;
    spec_options.max_k = std::clamp(options.max_k, 1, metrics::RouterSpecMetrics::kMaxK);
    auto spec = metrics::RouterSpecMetrics::Create(registry, spec_options);
    if (!spec.ok()) return spec.status();
    m->pools_.push_back(Pool{name, std::move(*spec), {}});
  }
  auto serving = metrics::RouterServingMetrics::Create(registry);
  if (!serving.ok()) return serving.status();
  m->serving_ = std::move(*serving);
  return m;
}

void RouterMetrics::Install(RouterOptions* options) {
  options->step_observer = [this](const StepStats& stats) { OnStep(stats); };
  options->admission_observer = [this](RequestId id, double queue_seconds, int32_t prompt_tokens) {
    OnAdmitted(id, queue_seconds, prompt_tokens);
  };
}

void RouterMetrics::SetCore(const RouterCore* core) {
  core_ = core;
  const nlohmann::json state = core->Snapshot().policy_state;
  tiered_policy_ = state.is_object() && state.contains("speculative_num_steps") &&
                   state["speculative_num_steps"].is_number();
}

size_t RouterMetrics::PoolIndex(const std::string& name) const {
  // A handful of pools: a linear scan of short strings beats hashing. Requests without a
  // pool (never speculative) count under the first one.
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (pools_[i].name == name) return i;
  }
  return 0;
}

void RouterMetrics::OnStep(const StepStats& stats) {
  for (Pool& pool : pools_) pool.step.clear();
  for (const RequestOutcome& r : stats.requests) {
    pools_[PoolIndex(r.pool)].step.push_back(metrics::ProposalOutcome{r.proposed, r.accepted, r.tree});
  }
  const double observed = stats.wall_seconds > 0 ? stats.emitted_tokens / stats.wall_seconds : 0.0;
  double tier = -1;
  if (tiered_policy_ && core_ != nullptr) {
    const double now = clock_->NowSeconds();
    if (now - tier_read_at_ >= tier_refresh_seconds_) {
      tier_read_at_ = now;
      const nlohmann::json state = core_->Snapshot().policy_state;
      if (state.is_object() && state.contains("speculative_num_steps") &&
          state["speculative_num_steps"].is_number()) {
        tier = state["speculative_num_steps"].get<double>();
      }
    }
  }
  for (Pool& pool : pools_) {
    if (!pool.step.empty()) pool.spec->RecordStep(pool.step);
    pool.spec->SetGoodput(stats.estimated_goodput, observed);
    if (tier >= 0) pool.spec->SetActiveTier(tier);
  }
  metrics::StepStageSeconds stages;
  stages.schedule = stats.schedule_seconds;
  stages.draft = stats.draft_seconds;
  stages.verify = stats.verify_seconds;
  stages.rpc_overhead = stats.rpc_overhead_seconds;
  stages.router = stats.router_seconds;
  serving_->RecordStep(stages, pending_emissions_);
  pending_emissions_.clear();
  metrics::StepPipelineOutcome pipeline;
  pipeline.overhead_seconds = stats.overhead_seconds;
  pipeline.alternative_held = stats.draft_ahead_alternatives_held;
  pipeline.dropped = stats.draft_ahead_dropped;
  pipeline.hypothesis_held = stats.draft_ahead_hypothesis_held;
  pipeline.draft_seconds = stats.draft_seconds + stats.draft_ahead_seconds;
  pipeline.hidden_draft_seconds = stats.hidden_draft_seconds;
  pipeline.verify_slowdown = stats.verify_slowdown;
  serving_->RecordPipeline(pipeline);
  UpdateLoad();
}

void RouterMetrics::OnAdmitted(RequestId id, double queue_seconds, int32_t prompt_tokens) {
  serving_->RecordAdmitted(std::max(0.0, queue_seconds), prompt_tokens);
  admitted_.insert(id);
  waiting_.fetch_sub(1, std::memory_order_relaxed);
  running_.fetch_add(1, std::memory_order_relaxed);
  UpdateLoad();
}

void RouterMetrics::OnIdle() {
  if (pending_emissions_.empty()) return;
  // Tokens of requests that ended at their prefill, with no decode step after them: they are
  // output all the same. The stage histograms get this one (prefill-only) step as zeros.
  serving_->RecordStep(metrics::StepStageSeconds{}, pending_emissions_);
  pending_emissions_.clear();
}

EventSink RouterMetrics::WrapSink(EventSink sink, double arrival_seconds) {
  auto request = std::make_shared<RequestClock>();
  request->arrival = arrival_seconds;
  return [this, request, sink = std::move(sink)](const StreamEvent& event) {
    OnEvent(*request, event);
    if (sink) sink(event);
  };
}

void RouterMetrics::OnEvent(RequestClock& request, const StreamEvent& event) {
  const double now = clock_->NowSeconds();
  if (!event.tokens.empty()) {
    metrics::TokenEmission emission;
    emission.n_tokens = static_cast<int>(event.tokens.size());
    if (request.last_token < 0) {
      emission.first = true;
      serving_->RecordFirstToken(std::max(0.0, now - request.arrival));
    } else {
      emission.interval_seconds = now - request.last_token;
    }
    request.last_token = now;
    pending_emissions_.push_back(emission);
  }
  if (!event.finished) return;
  serving_->RecordFinished(StatusOf(event.finish_reason), std::max(0.0, now - request.arrival));
  if (admitted_.erase(event.id) > 0) {
    running_.fetch_sub(1, std::memory_order_relaxed);
  } else {
    waiting_.fetch_sub(1, std::memory_order_relaxed);
  }
  UpdateLoad();
}

void RouterMetrics::RecordSubmitted() {
  waiting_.fetch_add(1, std::memory_order_relaxed);
  UpdateLoad();
}

void RouterMetrics::RecordRejected(bool was_submitted) {
  if (was_submitted) waiting_.fetch_sub(1, std::memory_order_relaxed);
  serving_->RecordFinished(metrics::RequestStatus::kRejected, 0);
  UpdateLoad();
}

void RouterMetrics::UpdateLoad() {
  serving_->SetLoad(std::max<int64_t>(0, waiting_.load(std::memory_order_relaxed)),
                    std::max<int64_t>(0, running_.load(std::memory_order_relaxed)));
}

std::vector<metrics::SpecSnapshot> RouterMetrics::Snapshots() const {
  std::vector<metrics::SpecSnapshot> out;
  out.reserve(pools_.size());
  for (const Pool& pool : pools_) out.push_back(pool.spec->Snapshot());
  return out;
}

nlohmann::json RouterMetrics::ServerInfoJson(const ServerInfo& core_info) const {
  nlohmann::json info = metrics::ServerInfoJson(Snapshots());
  info["policy"] = core_info.policy;
  info["policy_state"] = core_info.policy_state;
  info["drafter_pools"] = core_info.drafter_pools;
  info["queue_depth"] = core_info.queue_depth;
  info["running_requests"] = core_info.running;
  info["total_steps"] = core_info.steps;
  info["completed_requests"] = core_info.completed;
  info["total_blocks"] = core_info.total_blocks;
  info["reserved_blocks"] = core_info.reserved_blocks;
  info["overhead_p50_us"] = core_info.overhead_p50_us;
  info["overhead_p99_us"] = core_info.overhead_p99_us;
  info["latency_model"] = core_info.latency_model;
  info["latency_refit"] = core_info.latency_refit;
  info["pipeline"] = {
      {"draft_ahead_used", core_info.draft_ahead_used},
      {"draft_ahead_dropped", core_info.draft_ahead_dropped},
      {"draft_ahead_alternatives_held", core_info.draft_ahead_alternatives_held},
      {"decisions_made_ahead", core_info.decisions_made_ahead},
      {"draft_seconds", core_info.draft_seconds_total},
      {"hidden_draft_seconds", core_info.hidden_draft_seconds_total},
      {"hidden_share", core_info.draft_seconds_total > 0
                           ? core_info.hidden_draft_seconds_total / core_info.draft_seconds_total
                           : 0.0}};
  return info;
}

}  // namespace splitspec::router
