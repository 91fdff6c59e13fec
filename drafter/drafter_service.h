// The Drafter gRPC service: converts splitspec.v1 messages to the core's plain types and back,
// and serialises calls into the (single-threaded) DrafterCore.
//
// Thread-safe: gRPC calls handlers from many threads; one mutex guards the core.
#ifndef SPLITSPEC_DRAFTER_DRAFTER_SERVICE_H_
#define SPLITSPEC_DRAFTER_DRAFTER_SERVICE_H_

#include <mutex>

#include "drafter/drafter_core.h"
#include "splitspec/v1/drafter.grpc.pb.h"

namespace splitspec::drafter {

class DrafterService final : public v1::Drafter::Service {
 public:
  explicit DrafterService(DrafterCore* core) : core_(core) {}

  grpc::Status Propose(grpc::ServerContext* context, const v1::ProposeRequest* request,
                       v1::ProposeResponse* response) override;
  grpc::Status Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                       v1::ReleaseResponse* response) override;
  grpc::Status GetInfo(grpc::ServerContext* context, const v1::GetInfoRequest* request,
                       v1::WorkerInfo* response) override;

 private:
  std::mutex mu_;
  DrafterCore* core_;  // not owned
};

}  // namespace splitspec::drafter

#endif  // SPLITSPEC_DRAFTER_DRAFTER_SERVICE_H_
