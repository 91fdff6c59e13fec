// The router core's worker interfaces (router/worker_clients.h) over gRPC: thin wrappers of
// the clients in common/rpc/worker_clients.h.
//
// Thread-safety: as the interfaces require (the core calls them from its loop thread); the
// underlying stubs are thread-safe anyway.
#ifndef SPLITSPEC_ROUTER_SERVICE_GRPC_WORKERS_H_
#define SPLITSPEC_ROUTER_SERVICE_GRPC_WORKERS_H_

#include <string>
#include <utility>
#include <vector>

#include "common/rpc/worker_clients.h"
#include "router/worker_clients.h"

namespace splitspec::router {

class GrpcDrafter : public DrafterClient {
 public:
  // A drafter that is down fails its calls fast (no wait-for-ready), which the core turns into
  // k = 0 for that step; the channel reconnects in the background.
  // `server_name`: see rpc::MakeChannel. `step_socket`: Propose goes over the worker's step
  // socket when `address` is unix://PATH (rpc::DrafterClient::UseStepSocket), or over its TCP
  // step port when it reports one in GetInfo (common/rpc/step_tcp.h), polling for the
  // answer within `step_spin` of when it is due (rpc::AnswerSpin), its frames through shared
  // memory when `step_memory` (rpc::StepMemory); `on_pickup` hears how each answer there was
  // waited for (rpc::FramePickup).
  GrpcDrafter(const std::string& address, absl::Duration timeout, const std::string& server_name = "",
              bool step_socket = false, absl::Duration step_spin = absl::ZeroDuration(), bool step_memory = true,
              rpc::PickupObserver on_pickup = nullptr)
      : address_(address), client_(rpc::MakeChannel(address, server_name), timeout) {
    if (step_socket && rpc::IsUnixSocket(address)) {
      client_.UseStepSocket(rpc::StepSocketPath(address), step_spin, step_memory, std::move(on_pickup));
    } else if (step_socket) {
      client_.UseTcpStepSocket(rpc::StepEndpointFromInfo(address, [this] { return client_.GetInfo(); }), address,
                               step_spin, std::move(on_pickup));
    }
  }

  absl::StatusOr<spec::ProposeResponse> Propose(const std::vector<spec::ProposeItem>& items) override {
    return client_.Propose(items);
  }
  // Asleep: the router reads the verify answer first, so polling for this one would only take a
  // CPU from the workers while both compute (docs/benchmarks.md, "The verify call's slowdown
  // beside drafts made ahead; drafts made ahead awaited asleep").
  absl::StatusOr<spec::ProposeResponse> ProposeBesideVerify(const std::vector<spec::ProposeItem>& items) override {
    return client_.Propose(items, rpc::AnswerWait::kSleep);
  }
  absl::Status Release(const std::vector<spec::RequestId>& ids) override { return client_.Release(ids); }
  absl::StatusOr<spec::WorkerInfo> Info() override { return client_.GetInfo(); }
  void SetCallTimeout(absl::Duration timeout) override { client_.set_timeout(timeout); }
  const std::string& address() const { return address_; }

 private:
  std::string address_;
  rpc::DrafterClient client_;
};

class GrpcVerifier : public VerifierClient {
 public:
  // `step_socket`, `step_spin`, `step_memory`, `on_pickup`: Verify goes over the worker's step
  // socket when `address` is unix://PATH or at its TCP step port, as GrpcDrafter's Propose.
  GrpcVerifier(const std::string& address, absl::Duration timeout, const std::string& server_name = "",
               bool step_socket = false, absl::Duration step_spin = absl::ZeroDuration(), bool step_memory = true,
               rpc::PickupObserver on_pickup = nullptr)
      : address_(address), client_(rpc::MakeChannel(address, server_name), timeout) {
    if (step_socket && rpc::IsUnixSocket(address)) {
      client_.UseStepSocket(rpc::StepSocketPath(address), step_spin, step_memory, std::move(on_pickup));
    } else if (step_socket) {
      client_.UseTcpStepSocket(rpc::StepEndpointFromInfo(address, [this] { return client_.GetInfo(); }), address,
                               step_spin, std::move(on_pickup));
    }
  }

  absl::StatusOr<std::vector<spec::PrefillResult>> Prefill(const std::vector<spec::PrefillItem>& items) override {
    return client_.Prefill(items);
  }
  absl::StatusOr<spec::VerifyResponse> Verify(const std::vector<spec::VerifyItem>& items) override {
    return client_.Verify(items);
  }
  // Over a step socket the request is written, the work runs, then the answer is read.
  bool OverlapsWorkWithVerify() const override { return client_.has_step_socket(); }
  absl::StatusOr<spec::VerifyResponse> VerifyWhile(const std::vector<spec::VerifyItem>& items,
                                                   const std::function<void()>& work) override {
    return client_.Verify(items, work);
  }
  absl::Status Release(const std::vector<spec::RequestId>& ids) override { return client_.Release(ids); }
  absl::StatusOr<spec::WorkerInfo> Info() override { return client_.GetInfo(); }
  absl::Status Health() override { return client_.Health(); }
  void SetCallTimeout(absl::Duration timeout) override { client_.set_timeout(timeout); }
  absl::StatusOr<std::string> ModelDir() { return client_.GetModelDir(); }
  const std::string& address() const { return address_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return client_.channel(); }

 private:
  std::string address_;
  rpc::VerifierClient client_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_SERVICE_GRPC_WORKERS_H_
