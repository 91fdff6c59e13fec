// The router's drafter pools as the --drafter flags name them: "[NAME=]A[,B...]", each entry a
// plain address or a "dns:///host:port" name (router/replica_addresses.h). A pool of one plain
// address is that drafter's client; any other pool is a ReplicatedDrafter (requests spread over
// the replicas), whose replica set follows its names' addresses on each Refresh: a pod that
// appears behind a headless Service takes new requests, one that vanishes has its requests
// moved to the others. A name that does not resolve at start (pods not ready yet) leaves its
// pool empty until it does; meanwhile the pool's requests decode without drafts.
//
// No gRPC here: `make_client` builds a client for an address and `resolve` answers names.
//
// Thread-safety: Refresh may run on any thread while the core uses the pools; pools() and the
// clients live as long as the discovery.
#ifndef SPLITSPEC_ROUTER_DRAFTER_DISCOVERY_H_
#define SPLITSPEC_ROUTER_DRAFTER_DISCOVERY_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "router/clock.h"
#include "router/replica_addresses.h"
#include "router/replicated_drafter.h"
#include "router/worker_clients.h"

namespace splitspec::router {

class DrafterDiscovery {
 public:
  // `server_name`: the name the worker's TLS certificate must carry ("" = the address's host;
  // ReplicaAddresses::ServerNameOf).
  using ClientFactory = std::function<std::unique_ptr<DrafterClient>(
      const std::string& address, const std::string& server_name)>;
  using Resolver = ReplicaAddresses::Resolver;

  // `flags`: the --drafter values. An unnamed pool is "default" when it is the only one, else
  // "d<index>". INVALID_ARGUMENT for an empty or repeated name, an empty address list or a
  // malformed dns:/// name. `clock` (not owned) and `retry_seconds` go to ReplicatedDrafter.
  static absl::StatusOr<std::unique_ptr<DrafterDiscovery>> Create(
      const std::vector<std::string>& flags, ClientFactory make_client, Resolver resolve,
      const Clock* clock, double retry_seconds);

  // For RouterCore; valid while the discovery lives.
  const DrafterPools& pools() const { return pools_; }
  bool has_names() const;

  // Resolves every dns:/// name again and updates its pool's replicas.
  void Refresh();

  // The pool object of a replicated pool (null for a single fixed address). For tests.
  ReplicatedDrafter* replicated(const std::string& name) const;

 private:
  struct Pool {
    std::string name;
    ReplicaAddresses addresses;
    std::unique_ptr<ReplicatedDrafter> replicated;                  // null: one fixed address
    std::map<std::string, std::unique_ptr<DrafterClient>> clients;  // by address, never erased
  };
  explicit DrafterDiscovery(ClientFactory make_client) : make_client_(std::move(make_client)) {}
  DrafterClient* ClientFor(Pool& pool, const std::string& address);

  ClientFactory make_client_;
  std::mutex mu_;  // serialises Refresh
  std::vector<std::unique_ptr<Pool>> pools_by_flag_;
  DrafterPools pools_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_DRAFTER_DISCOVERY_H_
