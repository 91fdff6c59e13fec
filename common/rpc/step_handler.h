// Serves a gRPC service's unary method on a step socket (step_socket_server.h), so that both
// transports run the same handler code: parse, call, serialise; and the same method in the
// step socket's compact encoding beside it.
#ifndef SPLITSPEC_COMMON_RPC_STEP_HANDLER_H_
#define SPLITSPEC_COMMON_RPC_STEP_HANDLER_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/status.h"
#include "common/rpc/step_socket_server.h"

namespace splitspec::rpc {

// `call(request, response, after_sent)` is the service's method (a lambda over it), which may
// leave work for after the answer is sent in `*after_sent`; the handler answers UNIMPLEMENTED
// for any other method and INVALID_ARGUMENT for bytes that do not parse. No grpc::ServerContext
// is made: the services' methods do not use theirs, and making one costs microseconds a call.
template <typename Request, typename Response, typename Call>
StepHandler UnaryStepHandler(StepMethod served, Call call) {
  return [served, call = std::move(call)](StepMethod method, const std::string& bytes,
                                          std::function<void()>* after_sent) -> absl::StatusOr<std::string> {
    if (method != served) {
      return absl::UnimplementedError(absl::StrCat("step socket method ", static_cast<uint32_t>(method),
                                                   " is not served here"));
    }
    Request request;
    if (!request.ParseFromString(bytes)) return absl::InvalidArgumentError("step socket request does not parse");
    Response response;
    const grpc::Status status = call(&request, &response, after_sent);
    if (!status.ok()) return FromGrpcStatus(status);
    return response.SerializeAsString();
  };
}

// `with_protobuf` (a UnaryStepHandler) with the same method's compact encoding (step_codec.h)
// served beside it as `compact`: `decode` the request bytes (INVALID_ARGUMENT when they are not
// one), `call(items, after_sent)` on the core's types, `encode` the answer.
template <typename Decode, typename Call, typename Encode>
StepHandler WithCompactMethod(StepMethod compact, StepHandler with_protobuf, Decode decode, Call call,
                              Encode encode) {
  return [compact, with_protobuf = std::move(with_protobuf), decode = std::move(decode), call = std::move(call),
          encode = std::move(encode)](StepMethod method, const std::string& bytes,
                                      std::function<void()>* after_sent) -> absl::StatusOr<std::string> {
    if (method != compact) return with_protobuf(method, bytes, after_sent);
    auto request = decode(bytes);
    if (!request.ok()) return request.status();
    auto answer = call(*request, after_sent);
    if (!answer.ok()) return answer.status();
    return encode(*answer);
  };
}

// `others` with one more protobuf method served beside it: `served` goes to `call` (as in
// UnaryStepHandler), every other method to `others`.
template <typename Request, typename Response, typename Call>
StepHandler WithUnaryMethod(StepMethod served, StepHandler others, Call call) {
  return [served, others = std::move(others), one = UnaryStepHandler<Request, Response>(served, std::move(call))](
             StepMethod method, const std::string& bytes,
             std::function<void()>* after_sent) -> absl::StatusOr<std::string> {
    return method == served ? one(method, bytes, after_sent) : others(method, bytes, after_sent);
  };
}

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_STEP_HANDLER_H_
