// Verifier replicas from addresses and dns:/// names (see verifier_discovery.h).
#include "router/verifier_discovery.h"

#include <utility>

namespace splitspec::router {

absl::StatusOr<std::unique_ptr<VerifierDiscovery>> VerifierDiscovery::Create(
    const std::string& targets, ClientFactory make_client, Resolver resolve) {
  absl::StatusOr<ReplicaAddresses> addresses =
      ReplicaAddresses::Create(targets, std::move(resolve));
  if (!addresses.ok()) return addresses.status();
  std::unique_ptr<VerifierDiscovery> d(
      new VerifierDiscovery(std::move(make_client), *std::move(addresses)));
  for (const std::string& address : d->addresses_.current())
    d->initial_.push_back(d->ClientFor(address));
  return d;
}

VerifierClient* VerifierDiscovery::ClientFor(const std::string& address) {
  std::unique_ptr<VerifierClient>& client = clients_[address];
  if (client == nullptr) client = make_client_(address, addresses_.ServerNameOf(address));
  return client.get();
}

void VerifierDiscovery::Refresh(RouterCore* core) {
  std::vector<VerifierClient*> added, removed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const ReplicaAddresses::Change change = addresses_.Refresh();
    for (const std::string& address : change.added) added.push_back(ClientFor(address));
    for (const std::string& address : change.removed) removed.push_back(ClientFor(address));
  }
  if (!added.empty() || !removed.empty())
    core->UpdateVerifierReplicas(std::move(added), std::move(removed));
}

}  // namespace splitspec::router
