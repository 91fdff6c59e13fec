// absl::Status <-> grpc::Status. Both follow the canonical status codes, so the mapping keeps
// the code and the message; unknown numeric codes become UNKNOWN rather than a bogus value.
#ifndef SPLITSPEC_COMMON_RPC_STATUS_H_
#define SPLITSPEC_COMMON_RPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace splitspec::rpc {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_STATUS_H_
