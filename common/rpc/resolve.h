// Worker addresses: split into host and port, and resolved for replica discovery:
// "dns:///host:port" names every address the host resolves to (a Kubernetes headless Service
// lists one per ready pod), so the router can keep its replica set in step as pods come and go.
#ifndef SPLITSPEC_COMMON_RPC_RESOLVE_H_
#define SPLITSPEC_COMMON_RPC_RESOLVE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace splitspec::rpc {

// "host:port", "[v6]:port" or "dns:///host:port" split into the host (brackets removed) and the
// port. INVALID_ARGUMENT for anything else, a Unix socket address included.
absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address);

// True for "dns:///host:port" (gRPC's spelling; an authority between the slashes is refused).
bool IsDnsTarget(const std::string& target);

// Every IPv4 and IPv6 address of the target's host with its port ("10.0.0.7:50051",
// "[fd00::7]:50051"), sorted, without duplicates. Anything that is not a dns:/// target comes
// back as it is. INVALID_ARGUMENT for a malformed target, UNAVAILABLE when the name does not
// resolve.
absl::StatusOr<std::vector<std::string>> ResolveAddresses(const std::string& target);

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_RESOLVE_H_
