// RouterCore: submission, cancellation, admission, prefill, bookkeeping and snapshots.
// The decode step itself lives in router_step.cc.
#include "router/router_core.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "router/router_core_internal.h"

namespace splitspec::router {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone: return "none";
    case FinishReason::kLength: return "length";
    case FinishReason::kEos: return "eos";
    case FinishReason::kStopString: return "stop";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

double StepStats::MeanK() const {
  if (k.empty()) return 0;
  double s = 0;
  for (int32_t x : k) s += x;
  return s / k.size();
}

RouterCore::RouterCore(RouterOptions options, std::vector<VerifierClient*> verifiers,
                       DrafterPools drafters, std::unique_ptr<SpeculationPolicy> policy,
                       LatencyModel latency, const Clock* clock)
    : options_(std::move(options)),
      replicas_(std::move(verifiers), options_.probe_interval_seconds),
      drafters_(std::move(drafters)),
      policy_(std::move(policy)),
      latency_(std::move(latency)),
      clock_(clock),
      tracker_(options_.acceptance) {
  for (const auto& [name, client] : drafters_) {
    if (client != nullptr) pool_names_.push_back(name);
  }
  instance_id_ = options_.instance_id & 0xFFFFFF;
  while (instance_id_ == 0) instance_id_ = std::random_device()() & 0xFFFFFF;
  next_id_ = (static_cast<RequestId>(instance_id_) << kSequenceBits) | 1;
  latency_.set_batch_residual(options_.latency_residual);
  latency_.set_pipeline(options_.pipeline);
  if (options_.pipeline) {
    const int32_t greedy = std::max(0, options_.draft_ahead_alternatives);
    const int32_t sampled = options_.draft_ahead_sampled_alternatives < 0 ? greedy
                                                                          : options_.draft_ahead_sampled_alternatives;
    latency_.set_draft_ahead_alternatives(greedy, sampled);
  }
}

RouterCore::~RouterCore() = default;

absl::Status RouterCore::Init() {
  // Every replica serves the same model; the ones that answer now define it, the others are
  // probed from the loop until they answer.
  std::optional<spec::WorkerInfo> info;
  absl::Status first_error;
  int32_t max_k = std::max(options_.max_k, 0);
  int32_t max_context = 0;
  const double now = clock_->NowSeconds();
  for (int i = 0; i < replicas_.size(); ++i) {
    replicas_.at(i).client->SetCallTimeout(absl::Seconds(options_.deadline_ceiling_seconds));
    absl::StatusOr<spec::WorkerInfo> replica_info = replicas_.at(i).client->Info();
    if (!replica_info.ok()) {
      if (first_error.ok()) first_error = replica_info.status();
      replicas_.MarkDown(i, now, /*deadline_exceeded=*/false);
      replicas_.at(i).next_probe_at = now;
      continue;
    }
    replicas_.MarkUp(i, replica_info->total_blocks);
    if (replica_info->max_draft_tokens > 0) max_k = std::min(max_k, replica_info->max_draft_tokens);
    if (replica_info->max_context_tokens > 0) {
      max_context = max_context == 0 ? replica_info->max_context_tokens
                                     : std::min(max_context, replica_info->max_context_tokens);
    }
    if (!info.has_value()) info = *replica_info;
  }
  if (!info.has_value()) {
    return absl::Status(first_error.code(),
                        absl::StrCat("verifier Info failed: ", first_error.message()));
  }
  for (const std::string& name : pool_names_) {
    absl::StatusOr<spec::WorkerInfo> d = drafters_.at(name)->Info();
    if (d.ok() && d->max_draft_tokens > 0) max_k = std::min(max_k, d->max_draft_tokens);
  }
  MutexLock lock(&mu_);
  max_context_ = max_context;
  total_blocks_ = replicas_.MaxTotalBlocks();
  block_size_ = info->block_size > 0 ? info->block_size : 16;
  vocab_size_ = info->vocab_size;
  max_k_ = max_k;
  initialized_ = true;
  snapshot_.policy = policy_->Name();
  snapshot_.policy_state = policy_->Describe();
  snapshot_.latency_model = latency_.Summary();
  snapshot_.drafter_pools = pool_names_;
  snapshot_.total_blocks = replicas_.UpTotalBlocks();
  return absl::OkStatus();
}

int32_t RouterCore::BlocksFor(const GenerateRequest& r) const {
  int64_t tokens = static_cast<int64_t>(r.prompt.size()) + r.max_tokens + max_k_ + 1;
  // A request never holds more KV than the model's context: it finishes with kLength there.
  if (max_context_ > 0) tokens = std::min<int64_t>(tokens, max_context_);
  return static_cast<int32_t>(std::min<int64_t>((tokens + block_size_ - 1) / block_size_,
                                                INT32_MAX));
}

absl::StatusOr<RequestId> RouterCore::Submit(GenerateRequest request, EventSink sink) {
  if (request.prompt.empty()) return absl::InvalidArgumentError("prompt must not be empty");
  if (request.max_tokens < 1) return absl::InvalidArgumentError("max_tokens must be >= 1");
  if (!request.stop.empty() && !options_.detokenize) {
    return absl::InvalidArgumentError("stop strings need a detokenizer (none configured)");
  }
  for (const std::string& s : request.stop) {
    if (s.empty()) return absl::InvalidArgumentError("stop strings must not be empty");
  }
  const engine::SamplingParams& sp = request.sampling;
  if (!(sp.temperature >= 0) || !std::isfinite(sp.temperature) || sp.top_k < 0 ||
      !(sp.top_p > 0 && sp.top_p <= 1)) {
    return absl::InvalidArgumentError(
        "sampling: temperature >= 0, top_k >= 0 and top_p in (0, 1] required");
  }
  if (!request.drafter.empty() && !drafters_.count(request.drafter)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown drafter pool '", request.drafter, "'"));
  }
  MutexLock lock(&mu_);
  if (!initialized_) return absl::FailedPreconditionError("router core not initialised");
  if (!accepting_) return absl::UnavailableError("router is shutting down");
  if (vocab_size_ > 0) {
    for (int32_t t : request.prompt) {
      if (t < 0 || t >= vocab_size_) {
        return absl::InvalidArgumentError(
            absl::StrCat("prompt token id ", t, " outside the vocabulary [0, ", vocab_size_, ")"));
      }
    }
  }
  if (max_context_ > 0 && static_cast<int64_t>(request.prompt.size()) >= max_context_) {
    return absl::InvalidArgumentError(absl::StrCat("prompt of ", request.prompt.size(),
                                                   " tokens leaves no room in the model's context of ",
                                                   max_context_, " tokens"));
  }
  const int32_t blocks = BlocksFor(request);
  if (blocks > total_blocks_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", request.prompt.size(), " tokens) + max_tokens (", request.max_tokens,
        ") needs ", blocks, " KV blocks; the verifier has ", total_blocks_));
  }
  if (static_cast<int32_t>(waiting_.size()) >= options_.max_queue) {
    return absl::ResourceExhaustedError(
        absl::StrCat("request queue is full (", options_.max_queue, " waiting)"));
  }
  const RequestId id = next_id_++;
  waiting_.push_back(Waiting{id, std::move(request), std::move(sink), blocks, clock_->NowSeconds()});
  live_.insert(id);
  work_cv_.NotifyAll();
  return id;
}

absl::Status RouterCore::Cancel(RequestId id) {
  MutexLock lock(&mu_);
  if (!live_.count(id)) return absl::NotFoundError(absl::StrCat("no live request ", id));
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (it->id == id) {
      cancelled_waiting_.push_back(std::move(*it));
      waiting_.erase(it);
      live_.erase(id);
      work_cv_.NotifyAll();
      return absl::OkStatus();
    }
  }
  cancels_.push_back(id);
  work_cv_.NotifyAll();
  return absl::OkStatus();
}

bool RouterCore::HasWorkLocked() const {
  return !waiting_.empty() || !cancels_.empty() || !cancelled_waiting_.empty() ||
         running_count_ > 0;
}

bool RouterCore::WaitForWork(absl::Duration timeout) {
  MutexLock lock(&mu_);
  return work_cv_.WaitFor(&mu_, absl::ToChronoNanoseconds(timeout), [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    // While every replica a request needs is down, only a cancellation is worth waking for.
    if (stalled_) return !cancels_.empty() || !cancelled_waiting_.empty();
    return HasWorkLocked();
  });
}

void RouterCore::StopAccepting() {
  MutexLock lock(&mu_);
  accepting_ = false;
}

bool RouterCore::Idle() const {
  MutexLock lock(&mu_);
  return !HasWorkLocked();
}

bool RouterCore::RunStep() {
  follows_decode_step_ = previous_run_decoded_;
  previous_run_decoded_ = false;
  step_observed_ = false;
  {
    MutexLock lock(&mu_);
    if (!initialized_) return false;
  }
  ApplyReplicaChanges();
  ProbeReplicas();  // first, so a recovered replica takes requests in this very step
  std::vector<RequestId> cancels;
  std::vector<Waiting> admitted, dropped;
  std::vector<Waiting> refused;  // can never fit any more (the verifiers shrank)
  {
    MutexLock lock(&mu_);
    cancels.swap(cancels_);
    dropped.swap(cancelled_waiting_);
    while (!waiting_.empty() &&
           running_count_ + static_cast<int32_t>(admitted.size()) < options_.max_running) {
      Waiting& w = waiting_.front();
      if (w.blocks > total_blocks_) {
        live_.erase(w.id);
        refused.push_back(std::move(w));
        waiting_.pop_front();
        continue;
      }
      // The replica with the most free KV; FCFS: when none has room, the head waits.
      const int replica = replicas_.Choose(w.blocks);
      if (replica < 0) break;
      replicas_.Reserve(replica, w.blocks);
      w.replica = replica;
      admitted.push_back(std::move(w));
      waiting_.pop_front();
    }
    running_count_ += static_cast<int32_t>(admitted.size());
    reserved_blocks_ = replicas_.ReservedBlocks();
  }
  bool progress = !cancels.empty() || !admitted.empty() || !dropped.empty() || !refused.empty();
  for (Waiting& w : dropped) {
    StreamEvent e;
    e.id = w.id;
    e.finished = true;
    e.finish_reason = FinishReason::kCancelled;
    e.status = absl::CancelledError("cancelled by the client");
    e.usage.prompt_tokens = static_cast<int32_t>(w.request.prompt.size());
    if (w.sink) w.sink(e);
  }
  for (Waiting& w : refused) {
    StreamEvent e;
    e.id = w.id;
    e.finished = true;
    e.finish_reason = FinishReason::kError;
    e.status = absl::ResourceExhaustedError("the verifier's KV cache shrank below this request");
    e.usage.prompt_tokens = static_cast<int32_t>(w.request.prompt.size());
    if (w.sink) w.sink(e);
  }
  for (RequestId id : cancels) {
    for (auto& r : running_) {
      if (r->id != id || r->finished) continue;
      StreamEvent e;
      Finish(*r, FinishReason::kCancelled, absl::CancelledError("cancelled by the client"), &e);
      Emit(*r, e);
    }
  }
  StepStats stats;
  stats.step = steps_;
  std::vector<Active*> to_prefill = StartAdmitted(std::move(admitted));
  const int64_t completed_before = completed_;
  PlaceDisplaced(&to_prefill);
  if (!to_prefill.empty()) PrefillOnReplicas(to_prefill, &stats);
  const bool decoded = DecodeStep(&stats);
  previous_run_decoded_ = decoded;
  // Also after a prefill with no decode step behind it: its drafts made ahead count.
  draft_ahead_used_ += stats.draft_ahead_used;
  if (stats.decided_ahead) ++decisions_made_ahead_;
  draft_ahead_dropped_ += stats.draft_ahead_dropped;
  draft_ahead_alternatives_held_ += stats.draft_ahead_alternatives_held;
  // Tokens deferred by an earlier step go out with the next verify call; none follows here.
  if (!decoded) FlushEvents();
  progress = progress || decoded || !to_prefill.empty() || completed_ != completed_before;
  ReleaseAndReap();
  // A step held back is reported before this run's: none followed it (no decode step here).
  if (!decoded) FlushReport();
  StepReport report{std::move(stats), decoded, step_observed_, std::move(step_goodput_)};
  step_goodput_.reset();
  if (decoded && options_.defer_step_reports) {
    deferred_report_ = std::move(report);
  } else {
    Report(report);
  }
  {
    MutexLock lock(&mu_);
    // Nothing moved although there is work: every request waits for a replica to come back.
    stalled_ = !progress && HasWorkLocked();
  }
  return progress;
}

std::vector<RouterCore::Active*> RouterCore::StartAdmitted(std::vector<Waiting> admitted) {
  std::vector<Active*> started;
  const double admitted_at = clock_->NowSeconds();
  for (Waiting& w : admitted) {
    if (options_.admission_observer) {
      options_.admission_observer(w.id, admitted_at - w.submitted_at,
                                  static_cast<int32_t>(w.request.prompt.size()));
    }
    auto r = std::make_unique<Active>();
    r->id = w.id;
    r->blocks = w.blocks;
    r->replica = w.replica;
    r->sink = std::move(w.sink);
    r->request = std::move(w.request);
    r->history = r->request.prompt;
    r->prompt_len = static_cast<int32_t>(r->history.size());
    r->usage.prompt_tokens = r->prompt_len;
    for (const std::string& s : r->request.stop) r->max_stop_len = std::max(r->max_stop_len, s.size());
    started.push_back(r.get());
    running_.push_back(std::move(r));
  }
  return started;
}

void RouterCore::AppendTokens(Active& r, absl::Span<const int32_t> tokens, StreamEvent* event) {
  for (int32_t t : tokens) {
    if (r.finished) return;
    r.history.push_back(t);
    ++r.usage.completion_tokens;
    if (!r.request.ignore_eos && options_.eos_token_id >= 0 && t == options_.eos_token_id) {
      Finish(r, FinishReason::kEos, absl::OkStatus(), event);
      return;
    }
    event->tokens.push_back(t);
    if (!r.request.stop.empty()) {
      const std::string text = options_.detokenize(
          absl::MakeConstSpan(r.history).subspan(static_cast<size_t>(r.prompt_len)));
      // Only text that changed can hold a new match: scan from just before the old end.
      const size_t from = r.text_len > r.max_stop_len ? r.text_len - r.max_stop_len : 0;
      r.text_len = text.size();
      for (const std::string& s : r.request.stop) {
        if (text.find(s, std::min(from, text.size())) != std::string::npos) {
          event->matched_stop = s;
          Finish(r, FinishReason::kStopString, absl::OkStatus(), event);
          return;
        }
      }
    }
    // The context is full when the pending token has no position left to be fed at.
    if (r.usage.completion_tokens >= r.request.max_tokens ||
        (max_context_ > 0 && static_cast<int64_t>(r.history.size()) > max_context_)) {
      Finish(r, FinishReason::kLength, absl::OkStatus(), event);
      return;
    }
  }
}

void RouterCore::Finish(Active& r, FinishReason reason, absl::Status status, StreamEvent* event) {
  if (r.finished) return;
  r.finished = true;
  event->finished = true;
  event->finish_reason = reason;
  event->status = std::move(status);
  if (r.prefilled && r.replica >= 0) verifier_releases_[r.replica].push_back(r.id);
  for (const auto& [pool, known] : r.known) drafter_releases_[pool].push_back(r.id);
  r.known.clear();
  tracker_.Forget(r.id);
  policy_->Forget(r.id);
  ++completed_;
}

void RouterCore::Emit(Active& r, StreamEvent& event) {
  FlushEvents();
  if (event.tokens.empty() && !event.finished) return;
  event.id = r.id;
  event.usage = r.usage;
  if (r.sink) r.sink(event);
}

void RouterCore::EmitStepTokens(Active& r, StreamEvent& event) {
  if (!options_.defer_token_events || event.finished) return Emit(r, event);
  if (event.tokens.empty()) return;
  event.id = r.id;
  event.usage = r.usage;
  deferred_events_.emplace_back(&r, std::move(event));
}

void RouterCore::FlushEvents() {
  for (auto& [r, event] : deferred_events_) {
    if (r->sink) r->sink(event);
  }
  deferred_events_.clear();
}

void RouterCore::ReleaseAndReap() {
  // The drafters' releases run on the side thread while this one makes the verifiers': the
  // calls are independent round trips to different workers.
  const bool verifiers_to_tell = std::any_of(verifier_releases_.begin(), verifier_releases_.end(),
                                             [](const auto& entry) { return !entry.second.empty(); });
  const bool drafters_to_tell = std::any_of(drafter_releases_.begin(), drafter_releases_.end(),
                                            [](const auto& entry) { return !entry.second.empty(); });
  const bool beside = verifiers_to_tell && drafters_to_tell;
  if (beside) {
    side_thread_.Start([this] { ReleaseDrafterSessions(); });
  } else if (drafters_to_tell) {
    ReleaseDrafterSessions();
  }
  for (auto& [replica, ids] : verifier_releases_) {
    if (ids.empty()) continue;
    VerifierReplica& v = replicas_.at(replica);
    // A retired replica (discovery dropped it) is still told: it may be draining, not dead.
    if (v.up || v.retired) {
      (void)v.client->Release(ids);  // best effort: a worker that just died lost them anyway
    } else {
      v.stale_sessions.insert(v.stale_sessions.end(), ids.begin(), ids.end());
    }
    ids.clear();
  }
  if (beside) side_thread_.Wait();
  int32_t removed = 0;
  std::vector<RequestId> gone;
  for (auto& r : running_) {
    if (!r->finished) continue;
    if (r->replica >= 0) replicas_.Unreserve(r->replica, r->blocks);
    ++removed;
    gone.push_back(r->id);
  }
  if (removed == 0) return;
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [](const std::unique_ptr<Active>& r) { return r->finished; }),
                 running_.end());
  MutexLock lock(&mu_);
  reserved_blocks_ = replicas_.ReservedBlocks();
  running_count_ -= removed;
  for (RequestId id : gone) live_.erase(id);
}

void RouterCore::ReleaseDrafterSessions() {
  for (auto& [pool, ids] : drafter_releases_) {
    if (ids.empty()) continue;
    auto it = drafters_.find(pool);
    if (it != drafters_.end() && it->second != nullptr) (void)it->second->Release(ids);
    ids.clear();
  }
}

void RouterCore::AbortAll(const absl::Status& status) {
  std::deque<Waiting> waiting;
  {
    MutexLock lock(&mu_);
    waiting.swap(waiting_);
    for (const Waiting& w : waiting) live_.erase(w.id);
  }
  for (Waiting& w : waiting) {
    StreamEvent e;
    e.id = w.id;
    e.finished = true;
    e.finish_reason = FinishReason::kError;
    e.status = status;
    e.usage.prompt_tokens = static_cast<int32_t>(w.request.prompt.size());
    if (w.sink) w.sink(e);
  }
  for (auto& r : running_) {
    if (r->finished) continue;
    StreamEvent e;
    Finish(*r, FinishReason::kError, status, &e);
    Emit(*r, e);
  }
  ReleaseAndReap();
  UpdateSnapshot(nullptr);
}

void RouterCore::Report(StepReport& report) {
  if (report.goodput.has_value()) {
    // From the estimates the step decided with, priced by the latency model as it stands now
    // (the step's own timings already learnt). Pricing it before the step's calls took 1.5-3.5
    // us of the workers' p50 wait in router_step_bench's cold runs (1 request, serial and
    // pipelined, the pricing skipped and not by turns).
    GoodputEstimate& estimate = *report.goodput;
    report.stats.estimated_goodput =
        GoodputModel(latency_, std::move(estimate.items), estimate.max_k).Goodput(estimate.k);
  }
  if (report.observed && options_.step_observer) options_.step_observer(report.stats);
  UpdateSnapshot(report.decoded ? &report.stats : nullptr);
}

void RouterCore::FlushReport() {
  if (!deferred_report_.has_value()) return;
  StepReport report = std::move(*deferred_report_);
  deferred_report_.reset();
  Report(report);
}

void RouterCore::UpdateSnapshot(const StepStats* stats) {
  const bool refresh = stats == nullptr || options_.snapshot_every_steps <= 1 ||
                       steps_ % options_.snapshot_every_steps == 0 || running_.empty();
  nlohmann::json state;
  if (refresh) {
    state = policy_->Describe();
    if (tree_acceptance_.observations() > 0) state["tree_acceptance_by_width"] = tree_acceptance_.Describe();
    state["shape_calibration"] = calibration_.Describe();
  }
  MutexLock lock(&mu_);
  if (stats != nullptr) {
    overheads_.push_back(stats->overhead_seconds);
    while (overheads_.size() > 4096) overheads_.pop_front();
  }
  snapshot_.running = running_count_;
  snapshot_.steps = steps_;
  snapshot_.completed = completed_;
  snapshot_.draft_ahead_used = draft_ahead_used_;
  snapshot_.decisions_made_ahead = decisions_made_ahead_;
  snapshot_.draft_ahead_dropped = draft_ahead_dropped_;
  snapshot_.draft_ahead_alternatives_held = draft_ahead_alternatives_held_;
  snapshot_.draft_seconds_total = draft_seconds_total_;
  snapshot_.hidden_draft_seconds_total = hidden_draft_seconds_total_;
  snapshot_.reserved_blocks = reserved_blocks_;
  snapshot_.total_blocks = replicas_.UpTotalBlocks();
  if (!refresh) return;
  snapshot_.policy_state = std::move(state);
  snapshot_.mean_accept_length = tracker_.MeanAcceptLength();
  snapshot_.mean_accept_length_by_pool = tracker_.MeanAcceptLengthByPool();
  snapshot_.acceptance_estimate = tracker_.Global();
  snapshot_.acceptance_by_pool.clear();
  for (const std::string& p : pool_names_) snapshot_.acceptance_by_pool[p] = tracker_.Pool(p);
  snapshot_.k_histogram = k_histogram_;
  snapshot_.latency_model = latency_.Summary();
  snapshot_.latency_refit = target_fit_.Describe();
  snapshot_.latency_refit["batch_residual"] = latency_.batch_residual().Describe();
  // Each pool's draft-time correction (router/draft_correction.h): a call is predicted at
  // its per-call seconds plus its scale times the profile's line.
  auto per_pool = [this](double (LatencyModel::*figure)(const std::string&) const) {
    nlohmann::json by_pool = nlohmann::json::object();
    for (const std::string& p : pool_names_) by_pool[p] = (latency_.*figure)(p);
    return by_pool;
  };
  snapshot_.latency_refit["draft_scales"] = per_pool(&LatencyModel::draft_scale);
  snapshot_.latency_refit["draft_call_seconds"] = per_pool(&LatencyModel::draft_call_seconds);
  if (options_.pipeline) {
    // The same for the drafts made ahead beside the verify call (LatencyModel::ObserveDraftAhead).
    snapshot_.latency_refit["draft_ahead_scales"] = per_pool(&LatencyModel::draft_ahead_scale);
    snapshot_.latency_refit["draft_ahead_call_seconds"] = per_pool(&LatencyModel::draft_ahead_call_seconds);
    snapshot_.latency_refit["draft_ahead_verify_slowdown"] = latency_.verify_slowdown_estimate().Describe();
  }
}

ServerInfo RouterCore::Snapshot() const {
  MutexLock lock(&mu_);
  ServerInfo info = snapshot_;
  info.queue_depth = static_cast<int32_t>(waiting_.size());
  if (!overheads_.empty()) {
    std::vector<double> v(overheads_.begin(), overheads_.end());
    auto pct = [&v](double q) {
      const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
      std::nth_element(v.begin(), v.begin() + i, v.end());
      return v[i] * 1e6;
    };
    info.overhead_p50_us = pct(0.5);
    info.overhead_p99_us = pct(0.99);
  }
  return info;
}

}  // namespace splitspec::router
