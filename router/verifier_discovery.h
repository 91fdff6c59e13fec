// The router's verifier replicas as `--verifier` names them: plain addresses are fixed;
// "dns:///host:port" names are resolved at start and again every interval, and the replica
// set follows the answers (router_core.h, UpdateVerifierReplicas): a new address becomes a
// replica that takes new requests once it answers its probe, a vanished one has its requests
// moved to the others. A Kubernetes headless Service lists one address per ready pod, so
// scaling the verifier StatefulSet needs no change to the router's flags.
//
// No gRPC here: `make_client` builds a client for an address and `resolve` answers names
// (rpc::ResolveAddresses in the binary, fakes in tests). Clients are kept until destruction,
// removed ones included, since a moved request's session release may still use one.
//
// Thread-safety: Refresh may run on any thread (Start's task runs it on its own); the task
// Start returns must be destroyed before the core and the discovery.
#ifndef SPLITSPEC_ROUTER_VERIFIER_DISCOVERY_H_
#define SPLITSPEC_ROUTER_VERIFIER_DISCOVERY_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rpc/periodic_task.h"
#include "router/router_core.h"
#include "router/worker_clients.h"

namespace splitspec::router {

class VerifierDiscovery {
 public:
  using ClientFactory = std::function<std::unique_ptr<VerifierClient>(const std::string& address)>;
  using Resolver = std::function<absl::StatusOr<std::vector<std::string>>(const std::string& target)>;

  // `targets`: the --verifier list (comma-separated addresses and dns:/// names). Every name
  // must resolve now; INVALID_ARGUMENT for an empty list.
  static absl::StatusOr<std::unique_ptr<VerifierDiscovery>> Create(const std::string& targets, ClientFactory make_client,
                                                                   Resolver resolve);

  // The replicas at start (for RouterCore's constructor), in list order.
  std::vector<VerifierClient*> initial() const { return initial_; }
  bool has_names() const { return !names_.empty(); }

  // Re-resolves every dns:/// name each `interval` and reports changes to `core`, until the
  // returned task is destroyed (null when there is no name). A name that fails to resolve keeps
  // its last addresses (a DNS hiccup must not drop every replica).
  std::unique_ptr<rpc::PeriodicTask> Start(RouterCore* core, std::chrono::milliseconds interval);
  // One re-resolution pass now (what Start's thread runs; for tests).
  void Refresh(RouterCore* core);

 private:
  struct Name {
    std::string target;
    std::vector<std::string> addresses;
  };
  VerifierDiscovery(ClientFactory make_client, Resolver resolve)
      : make_client_(std::move(make_client)), resolve_(std::move(resolve)) {}
  VerifierClient* ClientFor(const std::string& address);

  ClientFactory make_client_;
  Resolver resolve_;
  std::mutex mu_;
  std::vector<Name> names_;
  std::map<std::string, std::unique_ptr<VerifierClient>> clients_;  // by address, never erased
  std::vector<VerifierClient*> initial_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_VERIFIER_DISCOVERY_H_
