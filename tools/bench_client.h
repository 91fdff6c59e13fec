// The router client of `splitspec bench`: one streaming Generate call, timed message by
// message into a RequestRecord, plus GetServerInfo. Owns nothing about scheduling.
//
// Thread-safety: RouterClient is safe to use from many threads at once (gRPC stubs are); each
// Generate call has its own ClientContext.
#ifndef SPLITSPEC_TOOLS_BENCH_CLIENT_H_
#define SPLITSPEC_TOOLS_BENCH_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "splitspec/v1/router.grpc.pb.h"
#include "tools/bench_stats.h"

namespace splitspec::tools::bench {

using SteadyTime = std::chrono::steady_clock::time_point;

class RouterClient {
 public:
  explicit RouterClient(const std::string& address);

  absl::StatusOr<v1::ServerInfo> GetServerInfo(absl::Duration timeout);

  // Sends `request` and reads its stream to the end, or until `deadline` (the call is then
  // cancelled by gRPC and the record marked failed). Times in the record are seconds from
  // `run_start`; send_s is taken just before the call starts.
  RequestRecord Generate(const v1::GenerateRequest& request, SteadyTime run_start,
                         SteadyTime deadline);

 private:
  std::unique_ptr<v1::Router::Stub> stub_;
};

const char* FinishReasonName(v1::FinishReason reason);

}  // namespace splitspec::tools::bench

#endif  // SPLITSPEC_TOOLS_BENCH_CLIENT_H_
