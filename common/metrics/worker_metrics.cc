// WorkerMetrics: handle resolution and updates.
#include "common/metrics/worker_metrics.h"

#include <string>

#include "common/metrics/assign_or_return.h"
#include "common/metrics/buckets.h"

namespace splitspec::metrics {

const char* WorkerRoleLabel(WorkerRole role) {
  return role == WorkerRole::kDrafter ? "drafter" : "verifier";
}

const char* ForwardKindLabel(ForwardKind kind) {
  switch (kind) {
    case ForwardKind::kPrefill:
      return "prefill";
    case ForwardKind::kDraftStep:
      return "draft_step";
    case ForwardKind::kVerify:
      return "verify";
  }
  return "verify";
}

absl::StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Create(MetricsRegistry& registry,
                                                                     WorkerRole role) {
  std::unique_ptr<WorkerMetrics> m(new WorkerMetrics());
  const std::string role_label = WorkerRoleLabel(role);

  prometheus::Family<prometheus::Histogram>* duration = nullptr;
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      duration, registry.HistogramFamily("splitspec_worker_forward_duration_seconds",
                                         "Wall time of one model forward by kind."));
  prometheus::Family<prometheus::Histogram>* batch = nullptr;
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      batch, registry.HistogramFamily("splitspec_worker_forward_batch_size",
                                      "Sequences batched in one model forward."));
  prometheus::Family<prometheus::Histogram>* tokens = nullptr;
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(tokens,
                                     registry.HistogramFamily("splitspec_worker_forward_tokens",
                                                              "Tokens fed to one model forward."));
  for (int k = 0; k < kNumForwardKinds; ++k) {
    const prometheus::Labels labels = {{"role", role_label},
                                       {"kind", ForwardKindLabel(static_cast<ForwardKind>(k))}};
    SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
        m->forward_[k].duration, registry.AddHistogram(*duration, labels, StepStageBuckets()));
    SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->forward_[k].batch_size,
                                       registry.AddHistogram(*batch, labels, BatchSizeBuckets()));
    SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->forward_[k].tokens,
                                       registry.AddHistogram(*tokens, labels, TokenCountBuckets()));
  }

  const prometheus::Labels role_labels = {{"role", role_label}};
  prometheus::Family<prometheus::Gauge>* g = nullptr;
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      g, registry.GaugeFamily("splitspec_worker_kv_blocks_used", "KV cache blocks in use."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->kv_used_, registry.AddGauge(*g, role_labels));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      g, registry.GaugeFamily("splitspec_worker_kv_blocks_free", "KV cache blocks free."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->kv_free_, registry.AddGauge(*g, role_labels));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      g, registry.GaugeFamily("splitspec_worker_live_sessions",
                              "Sessions (requests) holding state on this worker."));
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->live_sessions_, registry.AddGauge(*g, role_labels));

  prometheus::Family<prometheus::Counter>* errors = nullptr;
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      errors, registry.CounterFamily("splitspec_worker_rpc_errors_total",
                                     "RPCs answered with a non-OK status, by status code."));
  for (int c = 1; c < kNumCodes; ++c) {
    const prometheus::Labels labels = {
        {"role", role_label}, {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(c))}};
    SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->rpc_errors_[c], registry.AddCounter(*errors, labels));
  }
  return m;
}

void WorkerMetrics::RecordForward(ForwardKind kind, double seconds, int64_t batch_size,
                                  int64_t n_tokens) {
  const int k = static_cast<int>(kind);
  if (k < 0 || k >= kNumForwardKinds) return;
  forward_[k].duration->Observe(seconds);
  forward_[k].batch_size->Observe(static_cast<double>(batch_size));
  forward_[k].tokens->Observe(static_cast<double>(n_tokens));
}

void WorkerMetrics::Record(const ForwardRecord& forward) {
  for (absl::StatusCode code : forward.item_errors) RecordRpcError(code);
  RecordForward(forward.kind, forward.seconds, forward.batch_size, forward.tokens);
}

void WorkerMetrics::SetKvBlocks(int64_t used, int64_t free) {
  kv_used_->Set(static_cast<double>(used));
  kv_free_->Set(static_cast<double>(free));
}

void WorkerMetrics::SetLiveSessions(int64_t n) { live_sessions_->Set(static_cast<double>(n)); }

void WorkerMetrics::RecordRpcError(absl::StatusCode code) {
  int c = static_cast<int>(code);
  if (c == 0) return;
  if (c < 0 || c >= kNumCodes) c = static_cast<int>(absl::StatusCode::kUnknown);
  rpc_errors_[c]->Increment();
}

}  // namespace splitspec::metrics
