// Verifier gRPC adapter (see verifier_service.h).
#include "verifier/verifier_service.h"

#include <algorithm>
#include <chrono>

#include "common/rpc/convert.h"
#include "common/rpc/status.h"
#include "common/rpc/step_codec.h"
#include "common/rpc/step_handler.h"

namespace splitspec::verifier {

VerifierService::VerifierService(VerifierCore* core, metrics::WorkerMetrics* metrics, bool expose_model_path)
    : core_(core), metrics_(metrics), expose_model_path_(expose_model_path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    UpdateGauges();
  }
  reaper_ = rpc::StartLeaseReaper(core_->session_lease_seconds(), [this] {
    std::lock_guard<std::mutex> lock(mu_);
    if (core_->ReclaimIdle() > 0) UpdateGauges();
  });
}

void VerifierService::UpdateGauges() {
  if (metrics_ == nullptr) return;
  const spec::WorkerInfo info = core_->Info();
  metrics_->SetKvBlocks(info.total_blocks - info.free_blocks, info.free_blocks);
  metrics_->SetLiveSessions(info.live_sessions);
}

grpc::Status VerifierService::Reply(const absl::Status& status) {
  if (metrics_ != nullptr) metrics_->RecordRpcError(status.code());
  return rpc::ToGrpcStatus(status);
}

void VerifierService::CountItemError(const absl::Status& status) {
  if (metrics_ != nullptr && !status.ok()) metrics_->RecordRpcError(status.code());
}

grpc::Status VerifierService::Prefill(grpc::ServerContext*, const v1::PrefillRequest* request,
                                      v1::PrefillResponse* response) {
  const std::vector<spec::PrefillItem> items = rpc::FromProto(*request);
  std::lock_guard<std::mutex> lock(mu_);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<spec::PrefillResult>> results = core_->Prefill(items);
  if (!results.ok()) return Reply(results.status());
  for (const spec::PrefillResult& result : *results) CountItemError(result.status);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rpc::ToProto(*results, response);
  response->set_compute_seconds(seconds);
  const spec::WorkerInfo info = core_->Info();
  response->set_free_blocks(info.free_blocks);
  response->set_total_blocks(info.total_blocks);
  if (metrics_ != nullptr) {
    int64_t tokens = 0;
    for (const spec::PrefillItem& item : items) tokens += static_cast<int64_t>(item.tokens.size());
    metrics_->RecordForward(metrics::ForwardKind::kPrefill, seconds, static_cast<int64_t>(items.size()), tokens);
    metrics_->SetKvBlocks(info.total_blocks - info.free_blocks, info.free_blocks);
    metrics_->SetLiveSessions(info.live_sessions);
  }
  return grpc::Status::OK;
}

grpc::Status VerifierService::Verify(grpc::ServerContext*, const v1::VerifyRequest* request,
                                     v1::VerifyResponse* response) {
  std::function<void()> record;
  const grpc::Status status = VerifyThenRecord(request, response, &record);
  if (record) record();
  return status;
}

grpc::Status VerifierService::VerifyThenRecord(const v1::VerifyRequest* request, v1::VerifyResponse* response,
                                               std::function<void()>* record) {
  absl::StatusOr<spec::VerifyResponse> result = VerifyItems(rpc::FromProto(*request), record);
  if (!result.ok()) return rpc::ToGrpcStatus(result.status());
  rpc::ToProto(*result, response);
  return grpc::Status::OK;
}

absl::StatusOr<spec::VerifyResponse> VerifierService::VerifyItems(const std::vector<spec::VerifyItem>& items,
                                                                  std::function<void()>* record) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<spec::VerifyResponse> result = core_->Verify(items);
  if (!result.ok()) {
    if (metrics_ != nullptr) metrics_->RecordRpcError(result.status().code());
    return result.status();
  }
  if (metrics_ == nullptr) return result;
  // Each item feeds its pending token plus its draft nodes; a refused item counts with the
  // call errors (same metric, by code).
  metrics::ForwardRecord forward{metrics::ForwardKind::kVerify, result->compute_seconds,
                                 static_cast<int64_t>(items.size()), 0, {}};
  for (const spec::VerifyItem& item : items) forward.tokens += 1 + static_cast<int64_t>(item.draft.tokens.size());
  for (const spec::VerifyResult& item : result->results) {
    if (!item.status.ok()) forward.item_errors.push_back(item.status.code());
  }
  *record = [this, forward = std::move(forward)] {
    metrics_->Record(forward);
    std::lock_guard<std::mutex> lock(mu_);
    UpdateGauges();
  };
  return result;
}

rpc::StepHandler VerifierService::StepHandler() {
  rpc::StepHandler with_protobuf = rpc::UnaryStepHandler<v1::VerifyRequest, v1::VerifyResponse>(
      rpc::StepMethod::kVerify,
      [this](const v1::VerifyRequest* request, v1::VerifyResponse* response, std::function<void()>* after_sent) {
        return VerifyThenRecord(request, response, after_sent);
      });
  rpc::StepHandler verify = rpc::WithCompactMethod(
      rpc::StepMethod::kVerifyCompact, std::move(with_protobuf), rpc::DecodeVerifyItems,
      [this](const std::vector<spec::VerifyItem>& items, std::function<void()>* after_sent) {
        return VerifyItems(items, after_sent);
      },
      rpc::EncodeVerifyResponse);
  return rpc::WithUnaryMethod<v1::ReleaseRequest, v1::ReleaseResponse>(
      rpc::StepMethod::kRelease, std::move(verify),
      [this](const v1::ReleaseRequest* request, v1::ReleaseResponse* response, std::function<void()>*) {
        return Release(nullptr, request, response);
      });
}

grpc::Status VerifierService::Release(grpc::ServerContext*, const v1::ReleaseRequest* request,
                                      v1::ReleaseResponse* response) {
  const std::vector<spec::RequestId> ids = rpc::FromProto(*request);
  std::lock_guard<std::mutex> lock(mu_);
  response->set_released(core_->Release(ids));
  UpdateGauges();
  return grpc::Status::OK;
}

grpc::Status VerifierService::GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*, v1::WorkerInfo* response) {
  std::lock_guard<std::mutex> lock(mu_);
  rpc::ToProto(core_->Info(), response);
  response->set_step_port(step_port_.load());
  response->set_step_token(step_token_.load());
  if (expose_model_path_) response->set_model_dir(core_->model_dir());
  return grpc::Status::OK;
}

}  // namespace splitspec::verifier
