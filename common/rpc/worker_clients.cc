// gRPC worker clients (see worker_clients.h).
#include "common/rpc/worker_clients.h"

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <chrono>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/convert.h"
#include "common/rpc/resolve.h"
#include "common/rpc/status.h"
#include "common/rpc/step_codec.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace splitspec::rpc {
namespace {

constexpr int kMaxMessageBytes = 64 << 20;

std::chrono::system_clock::time_point Deadline(absl::Duration timeout) {
  return std::chrono::system_clock::now() + std::chrono::microseconds(absl::ToInt64Microseconds(timeout));
}

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) { context->set_deadline(Deadline(timeout)); }

// One call over a step socket: the response message, or nullopt when the request did not reach
// the socket (the caller then sends it over gRPC).
// `after_send`: see StepSocketClient::Call.
template <typename Response, typename Request>
std::optional<absl::StatusOr<Response>> CallStepSocket(StepSocketClient* step, StepMethod method,
                                                       const Request& request, absl::Duration timeout,
                                                       const std::function<void()>& after_send = nullptr,
                                                       AnswerWait wait = AnswerWait::kPollWhenDue) {
  if (step == nullptr) return std::nullopt;
  bool sent = false;
  absl::StatusOr<std::string> bytes =
      step->Call(method, request.SerializeAsString(), timeout, &sent, after_send, wait);
  if (!sent) return std::nullopt;
  if (!bytes.ok()) return bytes.status();
  Response response;
  if (!response.ParseFromString(*bytes)) return absl::InternalError("step socket answer does not parse");
  return response;
}

// One call over a step socket in a form a worker may not serve (the compact encoding of
// step_codec.h, or a method it predates): the decoded answer, or nullopt when the call must go
// another way: no socket, the request did not reach it, or a worker that does not serve it (it
// answers UNIMPLEMENTED, remembered in `*refused`, and the caller sends the same call in
// protobuf, or over gRPC). `encode` runs only when the socket is tried.
template <typename Answer, typename Encode, typename Decode>
std::optional<absl::StatusOr<Answer>> CallIfServed(StepSocketClient* step, StepMethod method, const Encode& encode,
                                                  const Decode& decode, absl::Duration timeout,
                                                  std::atomic<bool>* refused,
                                                  const std::function<void()>& after_send = nullptr,
                                                  AnswerWait wait = AnswerWait::kPollWhenDue) {
  if (step == nullptr || refused->load()) return std::nullopt;
  bool sent = false;
  absl::StatusOr<std::string> bytes = step->Call(method, encode(), timeout, &sent, after_send, wait);
  if (!sent) return std::nullopt;
  if (absl::IsUnimplemented(bytes.status())) {
    refused->store(true);
    return std::nullopt;
  }
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<Answer> answer = decode(*bytes);
  if (!answer.ok()) return absl::InternalError(absl::StrCat("step socket answer: ", answer.status().message()));
  return answer;
}

// Release over a step socket (CallIfServed, the gRPC method's messages): its status, or nullopt
// when it must go over gRPC.
std::optional<absl::Status> ReleaseOnStepSocket(StepSocketClient* step, const v1::ReleaseRequest& request,
                                                absl::Duration timeout, std::atomic<bool>* refused) {
  auto parse = [](const std::string& bytes) -> absl::StatusOr<v1::ReleaseResponse> {
    v1::ReleaseResponse response;
    if (!response.ParseFromString(bytes)) return absl::InvalidArgumentError("a Release answer that does not parse");
    return response;
  };
  auto released = CallIfServed<v1::ReleaseResponse>(
      step, StepMethod::kRelease, [&request] { return request.SerializeAsString(); }, parse, timeout, refused);
  if (!released) return std::nullopt;
  return released->status();
}

}  // namespace

// Set by UseClientTls; null = plaintext.
std::shared_ptr<grpc::ChannelCredentials>& ClientCredentials() {
  static auto* credentials = new std::shared_ptr<grpc::ChannelCredentials>();
  return *credentials;
}

absl::Status UseClientTls(const TlsFiles& files) {
  if (absl::Status s = ValidateTlsFiles(files); !s.ok()) return s;
  if (!files.enabled()) {
    ClientCredentials() = nullptr;
    return absl::OkStatus();
  }
  // Re-read every reload_seconds, as on the server side (server.h, TlsFiles).
  auto files_watcher = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.ca, static_cast<unsigned int>(files.reload_seconds));
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(files_watcher);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  // The worker's certificate must name the address dialled, as with SslCredentials.
  options.set_certificate_verifier(std::make_shared<grpc::experimental::HostNameCertificateVerifier>());
  ClientCredentials() = grpc::experimental::TlsCredentials(options);
  return absl::OkStatus();
}

std::shared_ptr<grpc::ChannelCredentials> WorkerChannelCredentials() {
  const std::shared_ptr<grpc::ChannelCredentials>& tls = ClientCredentials();
  return tls != nullptr ? tls : grpc::InsecureChannelCredentials();
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const std::string& server_name) {
  grpc::ChannelArguments args;
  if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel(address, WorkerChannelCredentials(), args);
}

VerifierClient::VerifierClient(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout)
    : channel_(std::move(channel)),
      stub_(v1::Verifier::NewStub(channel_)),
      timeout_us_(absl::ToInt64Microseconds(timeout)) {}

absl::StatusOr<std::vector<spec::PrefillResult>> VerifierClient::Prefill(const std::vector<spec::PrefillItem>& items) {
  v1::PrefillRequest request;
  ToProto(items, &request);
  v1::PrefillResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, timeout());
  const grpc::Status status = stub_->Prefill(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response);
}

absl::StatusOr<spec::VerifyResponse> VerifierClient::Verify(const std::vector<spec::VerifyItem>& items,
                                                            const std::function<void()>& while_waiting) {
  // Runs the work exactly once, whichever way the call goes.
  bool ran = false;
  const std::function<void()> run_once = [&] {
    if (ran || !while_waiting) return;
    ran = true;
    while_waiting();
  };
  if (auto answer = CallIfServed<spec::VerifyResponse>(
          step_.get(), StepMethod::kVerifyCompact, [&items] { return EncodeVerifyItems(items); },
          DecodeVerifyResponse, timeout(), &compact_refused_, run_once)) {
    run_once();
    return *std::move(answer);
  }
  v1::VerifyRequest request;
  ToProto(items, &request);
  auto answer = CallStepSocket<v1::VerifyResponse>(step_.get(), StepMethod::kVerify, request, timeout(), run_once);
  run_once();
  if (answer) {
    if (!answer->ok()) return answer->status();
    return FromProto(**answer);
  }
  v1::VerifyResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, timeout());
  const grpc::Status status = stub_->Verify(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response);
}

absl::Status VerifierClient::Release(const std::vector<spec::RequestId>& ids) {
  v1::ReleaseRequest request;
  request.mutable_request_ids()->Add(ids.begin(), ids.end());
  if (auto released = ReleaseOnStepSocket(step_.get(), request, timeout(), &release_refused_)) return *released;
  v1::ReleaseResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, timeout());
  return FromGrpcStatus(stub_->Release(&context, request, &response));
}

TcpStepEndpointLookup StepEndpointFromInfo(const std::string& address,
                                           std::function<absl::StatusOr<spec::WorkerInfo>()> get_info) {
  return [address, get_info = std::move(get_info)]() -> absl::StatusOr<TcpStepEndpoint> {
    absl::StatusOr<std::pair<std::string, int>> dialled = SplitHostPort(address);
    if (!dialled.ok()) return absl::NotFoundError(dialled.status().message());
    absl::StatusOr<spec::WorkerInfo> info = get_info();
    if (!info.ok()) return info.status();
    if (info->step_port <= 0) return absl::NotFoundError("the worker serves no step port");
    return TcpStepEndpoint{dialled->first, info->step_port, info->step_token};
  };
}

absl::StatusOr<spec::WorkerInfo> VerifierClient::GetInfo() {
  v1::WorkerInfo response;
  grpc::ClientContext context;
  SetDeadline(&context, timeout());
  const grpc::Status status = stub_->GetInfo(&context, v1::GetInfoRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response);
}

absl::StatusOr<std::string> VerifierClient::GetModelDir() {
  v1::WorkerInfo response;
  grpc::ClientContext context;
  SetDeadline(&context, timeout());
  const grpc::Status status = stub_->GetInfo(&context, v1::GetInfoRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.model_dir();
}

absl::Status VerifierClient::Health() { return CheckHealth(channel_, "splitspec.v1.Verifier", timeout()); }

DrafterClient::DrafterClient(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout)
    : channel_(std::move(channel)),
      stub_(v1::Drafter::NewStub(channel_)),
      timeout_us_(absl::ToInt64Microseconds(timeout)) {}

absl::StatusOr<spec::ProposeResponse> DrafterClient::Propose(const std::vector<spec::ProposeItem>& items,
                                                             AnswerWait wait) {
  if (auto answer = CallIfServed<spec::ProposeResponse>(
          step_.get(), StepMethod::kProposeCompact, [&items] { return EncodeProposeItems(items); },
          DecodeProposeResponse, timeout(), &compact_refused_, nullptr, wait)) {
    return *std::move(answer);
  }
  v1::ProposeRequest request;
  ToProto(items, &request);
  if (auto answer =
          CallStepSocket<v1::ProposeResponse>(step_.get(), StepMethod::kPropose, request, timeout(), nullptr, wait)) {
    if (!answer->ok()) return answer->status();
    return FromProto(**answer);
  }
  v1::ProposeResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, timeout());
  const grpc::Status status = stub_->Propose(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response);
}

absl::Status DrafterClient::Release(const std::vector<spec::RequestId>& ids) {
  v1::ReleaseRequest request;
  request.mutable_request_ids()->Add(ids.begin(), ids.end());
  if (auto released = ReleaseOnStepSocket(step_.get(), request, timeout(), &release_refused_)) return *released;
  v1::ReleaseResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, timeout());
  return FromGrpcStatus(stub_->Release(&context, request, &response));
}

absl::StatusOr<spec::WorkerInfo> DrafterClient::GetInfo() {
  v1::WorkerInfo response;
  grpc::ClientContext context;
  SetDeadline(&context, timeout());
  const grpc::Status status = stub_->GetInfo(&context, v1::GetInfoRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response);
}

absl::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                         absl::Duration timeout) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return absl::UnavailableError("health check failed: " + status.error_message());
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError("not serving");
  }
  return absl::OkStatus();
}

absl::Status WaitForHealthy(const std::string& address, absl::Duration timeout) {
  absl::Status s = WaitForHealthy(MakeChannel(address), timeout);
  if (s.ok() || !absl::IsDeadlineExceeded(s)) return s;
  return absl::DeadlineExceededError("server at " + address + " " + std::string(s.message()));
}

absl::Status WaitForHealthy(const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout) {
  const auto deadline = Deadline(timeout);
  absl::Status last = absl::UnavailableError("not reached");
  while (std::chrono::system_clock::now() < deadline) {
    // wait_for_ready blocks inside gRPC until the channel connects (or the deadline passes).
    auto stub = grpc::health::v1::Health::NewStub(channel);
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    context.set_deadline(deadline);
    const grpc::Status status = stub->Check(&context, request, &response);
    if (status.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::OkStatus();
    }
    last = status.ok() ? absl::UnavailableError("not serving") : FromGrpcStatus(status);
    // Only "not there yet" is worth waiting for; anything else (no health service, ...) is final.
    if (!status.ok() && status.error_code() != grpc::StatusCode::UNAVAILABLE) return last;
    if (status.ok()) {
      // Serving status can change; watch instead of polling.
      grpc::ClientContext watch_context;
      watch_context.set_deadline(deadline);
      auto reader = stub->Watch(&watch_context, request);
      while (reader->Read(&response)) {
        if (response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
          watch_context.TryCancel();
          reader->Finish();
          return absl::OkStatus();
        }
      }
      reader->Finish();
    }
  }
  return absl::DeadlineExceededError("not healthy in time: " + std::string(last.message()));
}

}  // namespace splitspec::rpc
