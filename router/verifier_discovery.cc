// Verifier replicas from addresses and dns:/// names (see verifier_discovery.h).
#include "router/verifier_discovery.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace splitspec::router {
namespace {

bool IsName(const std::string& target) { return absl::StartsWith(target, "dns:///"); }

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<VerifierDiscovery>> VerifierDiscovery::Create(const std::string& targets,
                                                                             ClientFactory make_client,
                                                                             Resolver resolve) {
  std::unique_ptr<VerifierDiscovery> d(new VerifierDiscovery(std::move(make_client), std::move(resolve)));
  for (absl::string_view piece : absl::StrSplit(targets, ',', absl::SkipEmpty())) {
    const std::string target(piece);
    std::vector<std::string> addresses = {target};
    if (IsName(target)) {
      absl::StatusOr<std::vector<std::string>> resolved = d->resolve_(target);
      if (!resolved.ok()) return resolved.status();
      addresses = Sorted(*resolved);
      d->names_.push_back({target, addresses});
    }
    for (const std::string& address : addresses) {
      VerifierClient* client = d->ClientFor(address);
      if (std::find(d->initial_.begin(), d->initial_.end(), client) == d->initial_.end()) {
        d->initial_.push_back(client);
      }
    }
  }
  if (d->initial_.empty()) return absl::InvalidArgumentError("--verifier names no replica");
  return d;
}

VerifierClient* VerifierDiscovery::ClientFor(const std::string& address) {
  std::unique_ptr<VerifierClient>& client = clients_[address];
  if (client == nullptr) client = make_client_(address);
  return client.get();
}

std::unique_ptr<rpc::PeriodicTask> VerifierDiscovery::Start(RouterCore* core, std::chrono::milliseconds interval) {
  if (names_.empty()) return nullptr;
  return std::make_unique<rpc::PeriodicTask>(interval, [this, core] { Refresh(core); });
}

void VerifierDiscovery::Refresh(RouterCore* core) {
  std::vector<VerifierClient*> added, removed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Addresses named by any entry before and after, so an address listed twice stays.
    std::vector<std::string> before, after;
    for (Name& name : names_) {
      before.insert(before.end(), name.addresses.begin(), name.addresses.end());
      absl::StatusOr<std::vector<std::string>> resolved = resolve_(name.target);
      if (resolved.ok() && !resolved->empty()) name.addresses = Sorted(*resolved);
      after.insert(after.end(), name.addresses.begin(), name.addresses.end());
    }
    before = Sorted(before);
    after = Sorted(after);
    for (const std::string& address : after) {
      if (!std::binary_search(before.begin(), before.end(), address)) added.push_back(ClientFor(address));
    }
    for (const std::string& address : before) {
      if (!std::binary_search(after.begin(), after.end(), address)) removed.push_back(ClientFor(address));
    }
  }
  if (!added.empty() || !removed.empty()) core->UpdateVerifierReplicas(std::move(added), std::move(removed));
}

}  // namespace splitspec::router
