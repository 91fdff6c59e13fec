// Verifier gRPC adapter (see verifier_service.h).
#include "verifier/verifier_service.h"

#include <chrono>

#include "common/rpc/convert.h"
#include "common/rpc/status.h"

namespace splitspec::verifier {

grpc::Status VerifierService::Prefill(grpc::ServerContext*, const v1::PrefillRequest* request,
                                      v1::PrefillResponse* response) {
  const std::vector<spec::PrefillItem> items = rpc::FromProto(*request);
  std::lock_guard<std::mutex> lock(mu_);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<spec::PrefillResult>> results = core_->Prefill(items);
  if (!results.ok()) return rpc::ToGrpcStatus(results.status());
  rpc::ToProto(*results, response);
  response->set_compute_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  const spec::WorkerInfo info = core_->Info();
  response->set_free_blocks(info.free_blocks);
  response->set_total_blocks(info.total_blocks);
  return grpc::Status::OK;
}

grpc::Status VerifierService::Verify(grpc::ServerContext*, const v1::VerifyRequest* request,
                                     v1::VerifyResponse* response) {
  const std::vector<spec::VerifyItem> items = rpc::FromProto(*request);
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<spec::VerifyResponse> result = core_->Verify(items);
  if (!result.ok()) return rpc::ToGrpcStatus(result.status());
  rpc::ToProto(*result, response);
  return grpc::Status::OK;
}

grpc::Status VerifierService::Release(grpc::ServerContext*, const v1::ReleaseRequest* request,
                                      v1::ReleaseResponse* response) {
  const std::vector<spec::RequestId> ids = rpc::FromProto(*request);
  std::lock_guard<std::mutex> lock(mu_);
  response->set_released(core_->Release(ids));
  return grpc::Status::OK;
}

grpc::Status VerifierService::GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*, v1::WorkerInfo* response) {
  std::lock_guard<std::mutex> lock(mu_);
  rpc::ToProto(core_->Info(), response);
  response->set_model_dir(core_->model_dir());
  return grpc::Status::OK;
}

}  // namespace splitspec::verifier
