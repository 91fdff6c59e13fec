// The router core's view of its workers: synchronous interfaces over the plain types of
// common/spec/worker_api.h. The gRPC adapter implements them over stubs, the simulator with
// latency models on a virtual clock, tests with in-process fakes.
//
// Thread-safety contract: RouterCore never calls one client concurrently: from its step-loop
// thread, and with several verifier replicas from one helper thread per replica during a step
// (each replica's client on at most one thread at a time). Implementations need not be
// thread-safe unless something else also uses them.
#ifndef SPLITSPEC_ROUTER_WORKER_CLIENTS_H_
#define SPLITSPEC_ROUTER_WORKER_CLIENTS_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/spec/worker_api.h"

namespace splitspec::router {

class DrafterClient {
 public:
  virtual ~DrafterClient() = default;
  // One result per item (matched by id); an item may get an empty draft (e.g. no n-gram
  // match) or its own non-OK status (no draft for it; its whole history is resent next time).
  // A call-level error means "no drafts this step" for all items: the router then runs them
  // with k = 0 and resends their whole history next time (known_length = 0).
  virtual absl::StatusOr<spec::ProposeResponse> Propose(
      const std::vector<spec::ProposeItem>& items) = 0;
  // A Propose made while a verify call is in flight (drafts made ahead, router_pipeline.cc):
  // the router needs the verify answer first, so a client that can wait for this one without
  // polling (rpc::AnswerWait::kSleep) should; by default, Propose.
  virtual absl::StatusOr<spec::ProposeResponse> ProposeBesideVerify(const std::vector<spec::ProposeItem>& items) {
    return Propose(items);
  }
  // Drops the sessions; unknown ids are not an error.
  virtual absl::Status Release(const std::vector<spec::RequestId>& ids) = 0;
  virtual absl::StatusOr<spec::WorkerInfo> Info() = 0;
  // Bounds the following calls (the router derives it from the latency model's prediction);
  // clients without deadlines ignore it.
  virtual void SetCallTimeout(absl::Duration timeout) { (void)timeout; }
};

class VerifierClient {
 public:
  virtual ~VerifierClient() = default;
  // Creates one session per item and returns each request's first generated token (or the
  // item's own error status). A call-level error: the replica failed (the router fails over).
  virtual absl::StatusOr<std::vector<spec::PrefillResult>> Prefill(
      const std::vector<spec::PrefillItem>& items) = 0;
  // One batched verification of every item (empty draft = plain decode); per-item statuses
  // as for Prefill.
  virtual absl::StatusOr<spec::VerifyResponse> Verify(
      const std::vector<spec::VerifyItem>& items) = 0;
  // True when VerifyWhile overlaps its work with the call on the calling thread (the request
  // is sent first, the answer read after the work); otherwise the router runs such work on a
  // thread of its own beside Verify.
  virtual bool OverlapsWorkWithVerify() const { return false; }
  // Verify, running `work` once on the calling thread while the call is in flight where the
  // client can (OverlapsWorkWithVerify), before it otherwise.
  virtual absl::StatusOr<spec::VerifyResponse> VerifyWhile(const std::vector<spec::VerifyItem>& items,
                                                           const std::function<void()>& work) {
    work();
    return Verify(items);
  }
  virtual absl::Status Release(const std::vector<spec::RequestId>& ids) = 0;
  virtual absl::StatusOr<spec::WorkerInfo> Info() = 0;
  // OK while the worker serves; a draining or unreachable one answers UNAVAILABLE. The gRPC
  // adapter asks grpc.health.v1; the default asks Info.
  virtual absl::Status Health() { return Info().status(); }
  virtual void SetCallTimeout(absl::Duration timeout) { (void)timeout; }
};

// Named drafter pools (`--drafter name=ADDR`, repeated). Not owned: they must outlive the
// RouterCore that uses them. May be empty (no speculation possible).
using DrafterPools = std::map<std::string, DrafterClient*>;

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_WORKER_CLIENTS_H_
