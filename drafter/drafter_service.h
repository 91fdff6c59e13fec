// The Drafter gRPC service: converts splitspec.v1 messages to the core's plain types and back,
// serialises calls into the (single-threaded) DrafterCore, and records the worker metrics
// (common/metrics/worker_metrics.h): one draft_step observation per Propose call, KV blocks,
// live sessions and RPC errors by code.
//
// Thread-safe: gRPC calls handlers from many threads; one mutex guards the core.
#ifndef SPLITSPEC_DRAFTER_DRAFTER_SERVICE_H_
#define SPLITSPEC_DRAFTER_DRAFTER_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "common/metrics/worker_metrics.h"
#include "common/rpc/periodic_task.h"
#include "common/rpc/step_socket_server.h"
#include "drafter/drafter_core.h"
#include "splitspec/v1/drafter.grpc.pb.h"

namespace splitspec::drafter {

class DrafterService final : public v1::Drafter::Service {
 public:
  // `metrics` may be null (no metrics); neither is owned. With metrics, the KV and session
  // gauges are set from the core right away.
  explicit DrafterService(DrafterCore* core, metrics::WorkerMetrics* metrics = nullptr);

  grpc::Status Propose(grpc::ServerContext* context, const v1::ProposeRequest* request,
                       v1::ProposeResponse* response) override;
  grpc::Status Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                       v1::ReleaseResponse* response) override;
  grpc::Status GetInfo(grpc::ServerContext* context, const v1::GetInfoRequest* request,
                       v1::WorkerInfo* response) override;
  // Propose and Release for the step socket (common/rpc/step_socket_server.h): the same
  // methods, another transport (Propose's protobuf messages or the compact encoding of
  // common/rpc/step_codec.h, its metrics recorded after the answer is sent; Release's messages).
  rpc::StepHandler StepHandler();
  // The TCP port of the step socket serving StepHandler and its token, which GetInfo reports
  // (0 = none). Set once the server has bound it, before it serves.
  void set_step_port(int port, uint64_t token) {
    step_token_.store(token);
    step_port_.store(port);
  }

 private:
  // Propose's answer; what it leaves in `*record` (metrics and gauges, taking mu_ itself) is
  // run by the caller after answering, or not at all.
  grpc::Status ProposeThenRecord(const v1::ProposeRequest* request, v1::ProposeResponse* response,
                                 std::function<void()>* record);
  // The same on the core's types, whichever encoding they came in; a refused call is counted.
  absl::StatusOr<spec::ProposeResponse> ProposeItems(const std::vector<spec::ProposeItem>& items,
                                                     std::function<void()>* record);
  // Gauges from the core's Info; mu_ held.
  void UpdateGauges();

  std::mutex mu_;
  DrafterCore* core_;                 // not owned
  metrics::WorkerMetrics* metrics_;  // not owned, may be null
  // Reclaims sessions whose lease ran out, a few times per lease period (none without leases).
  std::unique_ptr<rpc::PeriodicTask> reaper_;
  std::atomic<int> step_port_{0};
  std::atomic<uint64_t> step_token_{0};
};

}  // namespace splitspec::drafter

#endif  // SPLITSPEC_DRAFTER_DRAFTER_SERVICE_H_
