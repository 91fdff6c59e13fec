// The Verifier gRPC service: converts splitspec.v1 messages to the core's plain types and
// back, and serialises calls into the (single-threaded) VerifierCore.
//
// Thread-safe: gRPC calls handlers from many threads; one mutex guards the core.
#ifndef SPLITSPEC_VERIFIER_VERIFIER_SERVICE_H_
#define SPLITSPEC_VERIFIER_VERIFIER_SERVICE_H_

#include <mutex>

#include "splitspec/v1/verifier.grpc.pb.h"
#include "verifier/verifier_core.h"

namespace splitspec::verifier {

class VerifierService final : public v1::Verifier::Service {
 public:
  explicit VerifierService(VerifierCore* core) : core_(core) {}

  grpc::Status Prefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override;
  grpc::Status Verify(grpc::ServerContext* context, const v1::VerifyRequest* request,
                      v1::VerifyResponse* response) override;
  grpc::Status Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                       v1::ReleaseResponse* response) override;
  grpc::Status GetInfo(grpc::ServerContext* context, const v1::GetInfoRequest* request,
                       v1::WorkerInfo* response) override;

 private:
  std::mutex mu_;
  VerifierCore* core_;  // not owned
};

}  // namespace splitspec::verifier

#endif  // SPLITSPEC_VERIFIER_VERIFIER_SERVICE_H_
