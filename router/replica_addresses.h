// The addresses a replica list names: "A,B,dns:///host:port,...". Plain addresses are fixed;
// each dns:/// name stands for every address it resolves to and is resolved again on Refresh,
// which reports what appeared and what vanished. The diffing is all here, with the resolver
// injected, so discovery is tested without DNS (rpc::ResolveAddresses in the binary).
//
// Thread-compatible: the owner serialises Refresh.
#ifndef SPLITSPEC_ROUTER_REPLICA_ADDRESSES_H_
#define SPLITSPEC_ROUTER_REPLICA_ADDRESSES_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace splitspec::router {

class ReplicaAddresses {
 public:
  // target -> its addresses ("10.0.0.7:50051"); called only for dns:/// targets.
  using Resolver =
      std::function<absl::StatusOr<std::vector<std::string>>(const std::string& target)>;
  struct Change {
    std::vector<std::string> added;    // sorted
    std::vector<std::string> removed;  // sorted
    bool empty() const { return added.empty() && removed.empty(); }
  };

  // INVALID_ARGUMENT for a list that names nothing or a malformed name. With
  // `names_must_resolve`, a name that does not resolve now is an error (the verifier: the router
  // cannot serve without one); without, it starts with no address and joins on a later Refresh
  // (a drafter pool whose pods are not ready yet).
  static absl::StatusOr<ReplicaAddresses> Create(const std::string& targets, Resolver resolve,
                                                 bool names_must_resolve = true);

  // The addresses now, in list order (a name's in sorted order), each once.
  const std::vector<std::string>& current() const { return current_; }
  bool has_names() const { return !names_.empty(); }

  // The host of the dns:/// name that lists `address` ("verifier" for an address of
  // dns:///verifier:50051), "" for a plain address. A TLS client checks the worker's
  // certificate against it: a pod's IP is not known when its certificate is issued, the
  // Service's name is.
  std::string ServerNameOf(const std::string& address) const;

  // Resolves every name again. A name that fails to resolve, or resolves to nothing, keeps its
  // last addresses: a DNS hiccup must not drop every replica. An address named by two entries
  // stays while either names it.
  Change Refresh();

 private:
  struct Entry {
    std::string target;
    bool is_name = false;
    std::vector<std::string> addresses;  // sorted, unique
  };
  explicit ReplicaAddresses(Resolver resolve) : resolve_(std::move(resolve)) {}
  // current_ from entries_, in list order.
  void Collect();

  Resolver resolve_;
  std::vector<Entry> entries_;
  std::vector<size_t> names_;  // indices of the dns:/// entries
  std::vector<std::string> current_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_REPLICA_ADDRESSES_H_
