// The router's verifier replicas as `--verifier` names them (router/replica_addresses.h):
// plain addresses are fixed; "dns:///host:port" names are resolved at start and again every
// interval, and the replica set follows the answers (router_core.h, UpdateVerifierReplicas): a
// new address becomes a replica that takes new requests once it answers its probe, a vanished
// one has its requests moved to the others. A Kubernetes headless Service lists one address
// per ready pod, so scaling the verifier StatefulSet needs no change to the router's flags.
//
// No gRPC here: `make_client` builds a client for an address (and the name its certificate
// must carry, for TLS) and `resolve` answers names
// (rpc::ResolveAddresses in the binary, fakes in tests). Clients are kept until destruction,
// removed ones included, since a moved request's session release may still use one.
//
// Thread-safety: Refresh may run on any thread (a rpc::PeriodicTask in the binary) while the
// core runs; it must stop before the core and the discovery are destroyed.
#ifndef SPLITSPEC_ROUTER_VERIFIER_DISCOVERY_H_
#define SPLITSPEC_ROUTER_VERIFIER_DISCOVERY_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "router/replica_addresses.h"
#include "router/router_core.h"
#include "router/worker_clients.h"

namespace splitspec::router {

class VerifierDiscovery {
 public:
  // `server_name`: the name the worker's TLS certificate must carry ("" = the address's host;
  // ReplicaAddresses::ServerNameOf).
  using ClientFactory = std::function<std::unique_ptr<VerifierClient>(
      const std::string& address, const std::string& server_name)>;
  using Resolver = ReplicaAddresses::Resolver;

  // `targets`: the --verifier list (comma-separated addresses and dns:/// names). Every name
  // must resolve now; INVALID_ARGUMENT for an empty list.
  static absl::StatusOr<std::unique_ptr<VerifierDiscovery>> Create(const std::string& targets,
                                                                   ClientFactory make_client,
                                                                   Resolver resolve);

  // The replicas at start (for RouterCore's constructor), in list order.
  std::vector<VerifierClient*> initial() const { return initial_; }
  bool has_names() const { return addresses_.has_names(); }

  // Resolves every dns:/// name again and reports changes to `core`.
  void Refresh(RouterCore* core);

 private:
  VerifierDiscovery(ClientFactory make_client, ReplicaAddresses addresses)
      : make_client_(std::move(make_client)), addresses_(std::move(addresses)) {}
  VerifierClient* ClientFor(const std::string& address);

  ClientFactory make_client_;
  std::mutex mu_;
  ReplicaAddresses addresses_;
  std::map<std::string, std::unique_ptr<VerifierClient>> clients_;  // by address, never erased
  std::vector<VerifierClient*> initial_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_VERIFIER_DISCOVERY_H_
