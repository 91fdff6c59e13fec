// gRPC worker clients (see worker_clients.h).
#include "common/rpc/worker_clients.h"

#include <chrono>
#include <utility>

#include "common/rpc/convert.h"
#include "common/rpc/status.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace splitspec::rpc {
namespace {

constexpr int kMaxMessageBytes = 64 << 20;

std::chrono::system_clock::time_point Deadline(absl::Duration timeout) {
  return std::chrono::system_clock::now() + std::chrono::microseconds(absl::ToInt64Microseconds(timeout));
}

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) { context->set_deadline(Deadline(timeout)); }

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
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = *ReadPemFile(files.ca);
  options.pem_private_key = *ReadPemFile(files.key);
  options.pem_cert_chain = *ReadPemFile(files.cert);
  ClientCredentials() = grpc::SslCredentials(options);
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  const std::shared_ptr<grpc::ChannelCredentials>& tls = ClientCredentials();
  return grpc::CreateCustomChannel(address, tls != nullptr ? tls : grpc::InsecureChannelCredentials(), args);
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

absl::StatusOr<spec::VerifyResponse> VerifierClient::Verify(const std::vector<spec::VerifyItem>& items) {
  v1::VerifyRequest request;
  ToProto(items, &request);
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
  v1::ReleaseResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, timeout());
  return FromGrpcStatus(stub_->Release(&context, request, &response));
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

absl::StatusOr<spec::ProposeResponse> DrafterClient::Propose(const std::vector<spec::ProposeItem>& items) {
  v1::ProposeRequest request;
  ToProto(items, &request);
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
  const auto deadline = Deadline(timeout);
  std::shared_ptr<grpc::Channel> channel = MakeChannel(address);
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
  return absl::DeadlineExceededError("server at " + address + " not healthy in time: " + std::string(last.message()));
}

}  // namespace splitspec::rpc
