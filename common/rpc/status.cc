// Status mapping between Abseil and gRPC (see status.h).
#include "common/rpc/status.h"

#include <string>

namespace splitspec::rpc {
namespace {

// Codes 0..16 are the canonical set shared by absl::StatusCode and grpc::StatusCode.
constexpr int kMaxCanonicalCode = 16;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  const grpc::StatusCode grpc_code =
      (code > 0 && code <= kMaxCanonicalCode) ? static_cast<grpc::StatusCode>(code) : grpc::StatusCode::UNKNOWN;
  return grpc::Status(grpc_code, std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  const absl::StatusCode absl_code =
      (code > 0 && code <= kMaxCanonicalCode) ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown;
  return absl::Status(absl_code, status.error_message());
}

}  // namespace splitspec::rpc
