// WorkerMetrics: the drafter's and the verifier's metrics, told apart by the role label (they
// may share a process in tests and in the single-binary demo).
//
//   splitspec_worker_forward_duration_seconds{role,kind}   histogram, kind = prefill |
//                                                          draft_step | verify
//   splitspec_worker_forward_batch_size{role,kind}         histogram, sequences per forward
//   splitspec_worker_forward_tokens{role,kind}             histogram, tokens fed per forward
//   splitspec_worker_kv_blocks_used{role} / _free{role}    gauges
//   splitspec_worker_live_sessions{role}                   gauge
//   splitspec_worker_rpc_errors_total{role,code}           counter, code = gRPC code name
//
// Every series is pre-created (all three kinds, all 16 non-OK codes), so recording does no
// lookup and rate() over a series that has not fired yet reads 0 instead of nothing.
//
// Thread safety: every method may be called concurrently.
#ifndef SPLITSPEC_COMMON_METRICS_WORKER_METRICS_H_
#define SPLITSPEC_COMMON_METRICS_WORKER_METRICS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/metrics/metrics_registry.h"

namespace splitspec::metrics {

enum class WorkerRole { kDrafter, kVerifier };
const char* WorkerRoleLabel(WorkerRole role);  // "drafter" | "verifier"

enum class ForwardKind { kPrefill = 0, kDraftStep, kVerify };
inline constexpr int kNumForwardKinds = 3;
const char* ForwardKindLabel(ForwardKind kind);  // "prefill" | "draft_step" | "verify"

// One forward call's observations, gathered while the call runs and recorded (Record) after
// its answer has gone out.
struct ForwardRecord {
  ForwardKind kind = ForwardKind::kVerify;
  double seconds = 0;
  int64_t batch_size = 0;
  int64_t tokens = 0;
  std::vector<absl::StatusCode> item_errors;  // per-item refusals, counted with the call errors
};

class WorkerMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Create(MetricsRegistry& registry,
                                                               WorkerRole role);

  // One model forward: its wall time, the sequences batched and the tokens fed.
  void RecordForward(ForwardKind kind, double seconds, int64_t batch_size, int64_t n_tokens);
  void SetKvBlocks(int64_t used, int64_t free);
  void SetLiveSessions(int64_t n);
  // An RPC answered with a non-OK status (OK is ignored; codes outside absl's range count as
  // UNKNOWN).
  void RecordRpcError(absl::StatusCode code);
  // RecordForward and RecordRpcError for each item error.
  void Record(const ForwardRecord& forward);

 private:
  WorkerMetrics() = default;

  // Codes 0..16 as absl::StatusCode numbers them (the gRPC numbering); [0] stays null.
  static constexpr int kNumCodes = 17;

  struct ForwardHandles {
    prometheus::Histogram* duration = nullptr;
    prometheus::Histogram* batch_size = nullptr;
    prometheus::Histogram* tokens = nullptr;
  };
  std::array<ForwardHandles, kNumForwardKinds> forward_{};
  prometheus::Gauge* kv_used_ = nullptr;
  prometheus::Gauge* kv_free_ = nullptr;
  prometheus::Gauge* live_sessions_ = nullptr;
  std::array<prometheus::Counter*, kNumCodes> rpc_errors_{};
};

}  // namespace splitspec::metrics

#endif  // SPLITSPEC_COMMON_METRICS_WORKER_METRICS_H_
