// The Verifier gRPC service: converts splitspec.v1 messages to the core's plain types and
// back, serialises calls into the (single-threaded) VerifierCore, and records the worker
// metrics (common/metrics/worker_metrics.h): one prefill or verify observation per forward
// (each Prefill and Verify call is one batched target forward), KV blocks, live sessions and
// RPC errors by code.
//
// Thread-safe: gRPC calls handlers from many threads; one mutex guards the core.
#ifndef SPLITSPEC_VERIFIER_VERIFIER_SERVICE_H_
#define SPLITSPEC_VERIFIER_VERIFIER_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "common/metrics/worker_metrics.h"
#include "common/rpc/periodic_task.h"
#include "common/rpc/step_socket_server.h"
#include "splitspec/v1/verifier.grpc.pb.h"
#include "verifier/verifier_core.h"

namespace splitspec::verifier {

class VerifierService final : public v1::Verifier::Service {
 public:
  // `metrics` may be null (no metrics); neither is owned. With metrics, the KV and session
  // gauges are set from the core right away.
  // `expose_model_path`: GetInfo reports the model directory (off: a caller learns only the
  // model's name, not where this host keeps it).
  explicit VerifierService(VerifierCore* core, metrics::WorkerMetrics* metrics = nullptr,
                           bool expose_model_path = false);

  grpc::Status Prefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override;
  grpc::Status Verify(grpc::ServerContext* context, const v1::VerifyRequest* request,
                      v1::VerifyResponse* response) override;
  grpc::Status Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                       v1::ReleaseResponse* response) override;
  grpc::Status GetInfo(grpc::ServerContext* context, const v1::GetInfoRequest* request,
                       v1::WorkerInfo* response) override;
  // Verify and Release for the step socket (common/rpc/step_socket_server.h): the same
  // methods, another transport (Verify's protobuf messages or the compact encoding of
  // common/rpc/step_codec.h, its metrics recorded after the answer is sent; Release's messages).
  rpc::StepHandler StepHandler();
  // The TCP port of the step socket serving StepHandler and its token, which GetInfo reports
  // (0 = none). Set once the server has bound it, before it serves.
  void set_step_port(int port, uint64_t token) {
    step_token_.store(token);
    step_port_.store(port);
  }

 private:
  // Verify's answer; what it leaves in `*record` (metrics and gauges, taking mu_ itself) is run
  // by the caller after answering, or not at all.
  grpc::Status VerifyThenRecord(const v1::VerifyRequest* request, v1::VerifyResponse* response,
                                std::function<void()>* record);
  // The same on the core's types, whichever encoding they came in; a refused call is counted.
  absl::StatusOr<spec::VerifyResponse> VerifyItems(const std::vector<spec::VerifyItem>& items,
                                                   std::function<void()>* record);
  // Gauges from the core's Info; mu_ held.
  void UpdateGauges();
  // Counts a non-OK status by code and converts it.
  grpc::Status Reply(const absl::Status& status);
  // Counts one item's non-OK status with the call errors (same metric, by code).
  void CountItemError(const absl::Status& status);

  std::mutex mu_;
  VerifierCore* core_;                // not owned
  metrics::WorkerMetrics* metrics_;  // not owned, may be null
  // Reclaims sessions whose lease ran out, a few times per lease period (none without leases).
  std::unique_ptr<rpc::PeriodicTask> reaper_;
  std::atomic<int> step_port_{0};
  std::atomic<uint64_t> step_token_{0};
  bool expose_model_path_ = false;
};

}  // namespace splitspec::verifier

#endif  // SPLITSPEC_VERIFIER_VERIFIER_SERVICE_H_
