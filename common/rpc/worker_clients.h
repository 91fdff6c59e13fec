// gRPC clients for the worker services that speak the plain types of common/spec/worker_api.h,
// so the router (and tests, and the CLI) never touch generated messages. Also a health probe.
//
// Thread-safe: gRPC stubs may be used from several threads at once.
#ifndef SPLITSPEC_COMMON_RPC_WORKER_CLIENTS_H_
#define SPLITSPEC_COMMON_RPC_WORKER_CLIENTS_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/server.h"
#include "common/rpc/step_socket_client.h"
#include "common/spec/worker_api.h"
#include "splitspec/v1/drafter.grpc.pb.h"
#include "splitspec/v1/verifier.grpc.pb.h"

namespace splitspec::rpc {

// A channel with our message size limits: plaintext, or mutual TLS once UseClientTls was
// called (every channel made after that presents the certificate and checks the server's).
// `server_name`, when not empty, is the name the server's TLS certificate must carry instead of
// the address's host (a pod dialled by IP whose certificate names its Service).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const std::string& server_name = "");
// Sets the process's client certificate, key and trusted CA for MakeChannel (checked with
// ValidateTlsFiles). Call before making channels (not thread-safe with MakeChannel).
absl::Status UseClientTls(const TlsFiles& files);
// What MakeChannel's channels use: the TLS credentials UseClientTls set, or plaintext.
std::shared_ptr<grpc::ChannelCredentials> WorkerChannelCredentials();

// The lookup of a worker's TCP step endpoint for a client that dials it at `address`
// ("host:port"): the worker's WorkerInfo.step_port and step_token from `get_info`, on the host
// the address names (the host the router reaches, not the one the worker binds). NOT_FOUND when
// the worker reports none.
TcpStepEndpointLookup StepEndpointFromInfo(const std::string& address,
                                           std::function<absl::StatusOr<spec::WorkerInfo>()> get_info);

class VerifierClient {
 public:
  // `timeout` bounds every call (a verifier that hangs must not hang the router).
  explicit VerifierClient(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout = absl::Seconds(60));

  absl::StatusOr<std::vector<spec::PrefillResult>> Prefill(const std::vector<spec::PrefillItem>& items);
  // `while_waiting` (when given) runs once on the calling thread: over a step socket after the
  // request is sent and before the answer is read, over gRPC before the call.
  absl::StatusOr<spec::VerifyResponse> Verify(const std::vector<spec::VerifyItem>& items,
                                              const std::function<void()>& while_waiting = nullptr);
  // Over the step socket where there is one (and the worker serves it there), else gRPC.
  absl::Status Release(const std::vector<spec::RequestId>& ids);
  absl::StatusOr<spec::WorkerInfo> GetInfo();
  // The model directory the verifier loaded (for the router's tokenizer).
  absl::StatusOr<std::string> GetModelDir();
  // grpc.health.v1 of the Verifier service: UNAVAILABLE when draining or unreachable.
  absl::Status Health();
  // Bounds the calls made after it (safe to call while another thread makes calls).
  void set_timeout(absl::Duration timeout) { timeout_us_.store(absl::ToInt64Microseconds(timeout)); }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  // Whether Verify goes over a step socket: one is set, and, for a TCP step endpoint, connected
  // (a worker that serves none is called over gRPC every time).
  bool has_step_socket() const { return step_ != nullptr && (!step_->OverTcp() || step_->Connected()); }
  // Sends Verify over the worker's step socket at `path` (step_socket_wire.h) from now on, and
  // over gRPC while it cannot be reached. Call before the calls start.
  // `shared_memory`: frames through the connection's shared memory where the worker has it.
  // `on_pickup`: see StepSocketClient::set_pickup_observer.
  void UseStepSocket(const std::string& path, absl::Duration spin_margin = absl::ZeroDuration(),
                     bool shared_memory = true, PickupObserver on_pickup = nullptr) {
    step_ = std::make_unique<StepSocketClient>(path, spin_margin, shared_memory);
    step_->set_pickup_observer(std::move(on_pickup));
  }
  // The same over the worker's TCP step endpoint (step_tcp.h), which `lookup` finds when the
  // client connects; `name` is for messages.
  void UseTcpStepSocket(TcpStepEndpointLookup lookup, const std::string& name,
                        absl::Duration spin_margin = absl::ZeroDuration(), PickupObserver on_pickup = nullptr) {
    step_ = std::make_unique<StepSocketClient>(std::move(lookup), name, spin_margin);
    step_->set_pickup_observer(std::move(on_pickup));
  }

 private:
  absl::Duration timeout() const { return absl::Microseconds(timeout_us_.load()); }
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Verifier::Stub> stub_;
  std::atomic<int64_t> timeout_us_;
  std::unique_ptr<StepSocketClient> step_;
  // Set once the step socket answered the compact Verify with UNIMPLEMENTED (an older worker).
  std::atomic<bool> compact_refused_{false};
  // Set once the step socket answered Release with UNIMPLEMENTED.
  std::atomic<bool> release_refused_{false};
};

class DrafterClient {
 public:
  explicit DrafterClient(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout = absl::Seconds(60));

  // `wait`: how a call over the step socket waits for its answer (AnswerWait).
  absl::StatusOr<spec::ProposeResponse> Propose(const std::vector<spec::ProposeItem>& items,
                                                AnswerWait wait = AnswerWait::kPollWhenDue);
  // Over the step socket where there is one (and the worker serves it there), else gRPC.
  absl::Status Release(const std::vector<spec::RequestId>& ids);
  absl::StatusOr<spec::WorkerInfo> GetInfo();
  void set_timeout(absl::Duration timeout) { timeout_us_.store(absl::ToInt64Microseconds(timeout)); }
  // Propose over the worker's step socket, as VerifierClient::UseStepSocket.
  void UseStepSocket(const std::string& path, absl::Duration spin_margin = absl::ZeroDuration(),
                     bool shared_memory = true, PickupObserver on_pickup = nullptr) {
    step_ = std::make_unique<StepSocketClient>(path, spin_margin, shared_memory);
    step_->set_pickup_observer(std::move(on_pickup));
  }
  // Propose over a TCP step endpoint, as VerifierClient::UseTcpStepSocket.
  void UseTcpStepSocket(TcpStepEndpointLookup lookup, const std::string& name,
                        absl::Duration spin_margin = absl::ZeroDuration(), PickupObserver on_pickup = nullptr) {
    step_ = std::make_unique<StepSocketClient>(std::move(lookup), name, spin_margin);
    step_->set_pickup_observer(std::move(on_pickup));
  }

 private:
  absl::Duration timeout() const { return absl::Microseconds(timeout_us_.load()); }
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Drafter::Stub> stub_;
  std::atomic<int64_t> timeout_us_;
  std::unique_ptr<StepSocketClient> step_;
  // Set once the step socket answered the compact Propose with UNIMPLEMENTED (an older worker).
  std::atomic<bool> compact_refused_{false};
  // Set once the step socket answered Release with UNIMPLEMENTED.
  std::atomic<bool> release_refused_{false};
};

// grpc.health.v1 Check of `service` ("" = the whole server): OK when SERVING, UNAVAILABLE
// otherwise (including when the server cannot be reached within `timeout`).
absl::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel, const std::string& service = "",
                         absl::Duration timeout = absl::Seconds(2));

// Waits (using gRPC's connectivity wait, no polling sleeps) until the server is healthy or the
// deadline passes.
absl::Status WaitForHealthy(const std::string& address, absl::Duration timeout);
// The same over an existing channel.
absl::Status WaitForHealthy(const std::shared_ptr<grpc::Channel>& channel, absl::Duration timeout);

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_WORKER_CLIENTS_H_
