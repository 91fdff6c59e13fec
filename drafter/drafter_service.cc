// Drafter gRPC adapter (see drafter_service.h).
#include "drafter/drafter_service.h"

#include "common/rpc/convert.h"
#include "common/rpc/status.h"

namespace splitspec::drafter {

grpc::Status DrafterService::Propose(grpc::ServerContext*, const v1::ProposeRequest* request,
                                     v1::ProposeResponse* response) {
  const std::vector<spec::ProposeItem> items = rpc::FromProto(*request);
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<spec::ProposeResponse> result = core_->Propose(items);
  if (!result.ok()) return rpc::ToGrpcStatus(result.status());
  rpc::ToProto(*result, response);
  return grpc::Status::OK;
}

grpc::Status DrafterService::Release(grpc::ServerContext*, const v1::ReleaseRequest* request,
                                     v1::ReleaseResponse* response) {
  const std::vector<spec::RequestId> ids = rpc::FromProto(*request);
  std::lock_guard<std::mutex> lock(mu_);
  response->set_released(core_->Release(ids));
  return grpc::Status::OK;
}

grpc::Status DrafterService::GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*, v1::WorkerInfo* response) {
  std::lock_guard<std::mutex> lock(mu_);
  rpc::ToProto(core_->Info(), response);
  return grpc::Status::OK;
}

}  // namespace splitspec::drafter
