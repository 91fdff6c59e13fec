// Drafter pools from --drafter flags (see drafter_discovery.h).
#include "router/drafter_discovery.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace splitspec::router {

absl::StatusOr<std::unique_ptr<DrafterDiscovery>> DrafterDiscovery::Create(
    const std::vector<std::string>& flags, ClientFactory make_client, Resolver resolve,
    const Clock* clock, double retry_seconds) {
  std::unique_ptr<DrafterDiscovery> d(new DrafterDiscovery(std::move(make_client)));
  for (size_t i = 0; i < flags.size(); ++i) {
    const std::string& flag = flags[i];
    const size_t eq = flag.find('=');
    const std::string name = eq != std::string::npos
                                 ? flag.substr(0, eq)
                                 : (flags.size() == 1 ? "default" : absl::StrCat("d", i));
    const std::string targets = eq == std::string::npos ? flag : flag.substr(eq + 1);
    if (name.empty() || d->pools_.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("bad or repeated --drafter '", flag, "'"));
    }
    absl::StatusOr<ReplicaAddresses> addresses =
        ReplicaAddresses::Create(targets, resolve,
                                 /*names_must_resolve=*/false);
    if (!addresses.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--drafter '", flag, "': ", addresses.status().message()));
    }
    auto pool = std::make_unique<Pool>(Pool{name, *std::move(addresses), nullptr, {}});
    std::vector<DrafterClient*> replicas;
    for (const std::string& address : pool->addresses.current())
      replicas.push_back(d->ClientFor(*pool, address));
    if (replicas.size() == 1 && !pool->addresses.has_names()) {
      d->pools_[name] = replicas[0];
    } else {
      pool->replicated = std::make_unique<ReplicatedDrafter>(replicas, clock, retry_seconds);
      d->pools_[name] = pool->replicated.get();
    }
    d->pools_by_flag_.push_back(std::move(pool));
  }
  return d;
}

DrafterClient* DrafterDiscovery::ClientFor(Pool& pool, const std::string& address) {
  std::unique_ptr<DrafterClient>& client = pool.clients[address];
  if (client == nullptr) client = make_client_(address, pool.addresses.ServerNameOf(address));
  return client.get();
}

bool DrafterDiscovery::has_names() const {
  for (const auto& pool : pools_by_flag_) {
    if (pool->addresses.has_names()) return true;
  }
  return false;
}

void DrafterDiscovery::Refresh() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& pool : pools_by_flag_) {
    if (!pool->addresses.has_names()) continue;
    const ReplicaAddresses::Change change = pool->addresses.Refresh();
    if (change.empty()) continue;
    std::vector<DrafterClient*> added, removed;
    for (const std::string& address : change.added) added.push_back(ClientFor(*pool, address));
    for (const std::string& address : change.removed) removed.push_back(ClientFor(*pool, address));
    pool->replicated->UpdateReplicas(std::move(added), std::move(removed));
  }
}

ReplicatedDrafter* DrafterDiscovery::replicated(const std::string& name) const {
  for (const auto& pool : pools_by_flag_) {
    if (pool->name == name) return pool->replicated.get();
  }
  return nullptr;
}

}  // namespace splitspec::router
