// Drafter gRPC adapter (see drafter_service.h).
#include "drafter/drafter_service.h"

#include <algorithm>
#include <chrono>

#include "common/rpc/convert.h"
#include "common/rpc/status.h"
#include "common/rpc/step_codec.h"
#include "common/rpc/step_handler.h"

namespace splitspec::drafter {

DrafterService::DrafterService(DrafterCore* core, metrics::WorkerMetrics* metrics)
    : core_(core), metrics_(metrics) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    UpdateGauges();
  }
  reaper_ = rpc::StartLeaseReaper(core_->session_lease_seconds(), [this] {
    std::lock_guard<std::mutex> lock(mu_);
    if (core_->ReclaimIdle() > 0) UpdateGauges();
  });
}

void DrafterService::UpdateGauges() {
  if (metrics_ == nullptr) return;
  const spec::WorkerInfo info = core_->Info();
  metrics_->SetKvBlocks(info.total_blocks - info.free_blocks, info.free_blocks);
  metrics_->SetLiveSessions(info.live_sessions);
}

grpc::Status DrafterService::Propose(grpc::ServerContext*, const v1::ProposeRequest* request,
                                     v1::ProposeResponse* response) {
  std::function<void()> record;
  const grpc::Status status = ProposeThenRecord(request, response, &record);
  if (record) record();
  return status;
}

grpc::Status DrafterService::ProposeThenRecord(const v1::ProposeRequest* request, v1::ProposeResponse* response,
                                               std::function<void()>* record) {
  absl::StatusOr<spec::ProposeResponse> result = ProposeItems(rpc::FromProto(*request), record);
  if (!result.ok()) return rpc::ToGrpcStatus(result.status());
  rpc::ToProto(*result, response);
  return grpc::Status::OK;
}

absl::StatusOr<spec::ProposeResponse> DrafterService::ProposeItems(const std::vector<spec::ProposeItem>& items,
                                                                   std::function<void()>* record) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<spec::ProposeResponse> result = core_->Propose(items);
  if (!result.ok()) {
    UpdateGauges();  // a failed call can still have synced sessions before the proposer ran
    if (metrics_ != nullptr) metrics_->RecordRpcError(result.status().code());
    return result.status();
  }
  if (metrics_ == nullptr) return result;
  // Refused items count with the call errors (same metric, by code). The proposer runs its
  // catch-up and max(k) draft forwards inside one call, so the drafter observes the call:
  // tokens = catch-up tokens fed plus draft tokens produced.
  metrics::ForwardRecord forward{metrics::ForwardKind::kDraftStep, result->compute_seconds,
                                 static_cast<int64_t>(items.size()), 0, {}};
  for (const spec::ProposeItem& item : items) forward.tokens += static_cast<int64_t>(item.new_tokens.size());
  for (const spec::ProposeResult& r : result->results) {
    forward.tokens += static_cast<int64_t>(r.draft.tokens.size());
    if (!r.status.ok()) forward.item_errors.push_back(r.status.code());
  }
  *record = [this, forward = std::move(forward)] {
    metrics_->Record(forward);
    std::lock_guard<std::mutex> lock(mu_);
    UpdateGauges();
  };
  return result;
}

rpc::StepHandler DrafterService::StepHandler() {
  rpc::StepHandler with_protobuf = rpc::UnaryStepHandler<v1::ProposeRequest, v1::ProposeResponse>(
      rpc::StepMethod::kPropose,
      [this](const v1::ProposeRequest* request, v1::ProposeResponse* response, std::function<void()>* after_sent) {
        return ProposeThenRecord(request, response, after_sent);
      });
  rpc::StepHandler propose = rpc::WithCompactMethod(
      rpc::StepMethod::kProposeCompact, std::move(with_protobuf), rpc::DecodeProposeItems,
      [this](const std::vector<spec::ProposeItem>& items, std::function<void()>* after_sent) {
        return ProposeItems(items, after_sent);
      },
      rpc::EncodeProposeResponse);
  return rpc::WithUnaryMethod<v1::ReleaseRequest, v1::ReleaseResponse>(
      rpc::StepMethod::kRelease, std::move(propose),
      [this](const v1::ReleaseRequest* request, v1::ReleaseResponse* response, std::function<void()>*) {
        return Release(nullptr, request, response);
      });
}

grpc::Status DrafterService::Release(grpc::ServerContext*, const v1::ReleaseRequest* request,
                                     v1::ReleaseResponse* response) {
  const std::vector<spec::RequestId> ids = rpc::FromProto(*request);
  std::lock_guard<std::mutex> lock(mu_);
  response->set_released(core_->Release(ids));
  UpdateGauges();
  return grpc::Status::OK;
}

grpc::Status DrafterService::GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*, v1::WorkerInfo* response) {
  std::lock_guard<std::mutex> lock(mu_);
  rpc::ToProto(core_->Info(), response);
  response->set_step_port(step_port_.load());
  response->set_step_token(step_token_.load());
  return grpc::Status::OK;
}

}  // namespace splitspec::drafter
