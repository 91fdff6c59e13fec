// Streaming Generate client for `splitspec bench`.
#include "tools/bench_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/rpc/worker_clients.h"

namespace splitspec::tools::bench {
namespace {

double SecondsBetween(SteadyTime from, SteadyTime to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

const char* FinishReasonName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_EOS:
      return "eos";
    default:
      return "unspecified";
  }
}

RouterClient::RouterClient(const std::string& address)
    : stub_(v1::Router::NewStub(rpc::MakeChannel(address))) {}

absl::StatusOr<v1::ServerInfo> RouterClient::GetServerInfo(absl::Duration timeout) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1::ServerInfo info;
  grpc::Status status = stub_->GetServerInfo(&context, v1::GetServerInfoRequest(), &info);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("GetServerInfo: ", status.error_message(), " (code ",
                                               static_cast<int>(status.error_code()), ")"));
  }
  return info;
}

RequestRecord RouterClient::Generate(const v1::GenerateRequest& request, SteadyTime run_start,
                                     SteadyTime deadline) {
  RequestRecord record;
  grpc::ClientContext context;
  // gRPC takes system_clock deadlines; convert the steady one at the last moment.
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(
                           deadline - std::chrono::steady_clock::now()));
  const SteadyTime sent = std::chrono::steady_clock::now();
  record.send_s = SecondsBetween(run_start, sent);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub_->Generate(&context, request);

  v1::GenerateResponse response;
  SteadyTime last_tokens = sent;
  int64_t streamed_tokens = 0;
  v1::Usage usage;
  v1::FinishReason finish = v1::FINISH_REASON_UNSPECIFIED;
  while (reader->Read(&response)) {
    const SteadyTime now = std::chrono::steady_clock::now();
    if (response.token_ids_size() > 0) {
      // Only messages that deliver tokens are "chunks" for TTFT / ITL (vLLM counts chunks with
      // content); a bare final message with the usage is not a token arrival.
      if (streamed_tokens == 0) {
        record.ttft_s = SecondsBetween(sent, now);
      } else {
        record.itl_s.push_back(SecondsBetween(last_tokens, now));
      }
      last_tokens = now;
      streamed_tokens += response.token_ids_size();
    }
    if (response.has_usage()) usage = response.usage();
    if (response.finish_reason() != v1::FINISH_REASON_UNSPECIFIED)
      finish = response.finish_reason();
  }
  const grpc::Status status = reader->Finish();
  record.e2e_s = SecondsBetween(sent, std::chrono::steady_clock::now());
  record.ok = status.ok();
  if (!status.ok()) {
    record.error =
        absl::StrCat(status.error_message(), " (code ", static_cast<int>(status.error_code()), ")");
  }
  // What the client saw is the ground truth for token counts; usage fills in the rest.
  record.output_tokens = streamed_tokens;
  record.prompt_tokens = usage.prompt_tokens();
  record.steps = usage.steps();
  record.drafted_tokens = usage.drafted_tokens();
  record.accepted_tokens = usage.accepted_tokens();
  record.finish_reason = FinishReasonName(finish);
  return record;
}

}  // namespace splitspec::tools::bench
