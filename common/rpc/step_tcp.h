// Step sockets over TCP (step_socket_wire.h): for a router that reaches its workers by host and
// port (other machines, Kubernetes pods) rather than by a Unix socket path.
//
// A worker started with --step-port listens there beside its gRPC port and says which port in
// GetInfo (WorkerInfo.step_port); the router asks for it when it connects and dials the same host
// it dials for gRPC. The frames are those of a Unix step socket, never through shared memory.
#ifndef SPLITSPEC_COMMON_RPC_STEP_TCP_H_
#define SPLITSPEC_COMMON_RPC_STEP_TCP_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace splitspec::rpc {

// A listening TCP socket on host:port (port 0: a free one); `*bound_port` gets the port.
// UNAVAILABLE when the host does not resolve or the port cannot be bound.
absl::StatusOr<int> ListenTcp(const std::string& host, int port, int* bound_port);

// A connected TCP socket to host:port with Nagle's algorithm off, or UNAVAILABLE: no address,
// refused, or not connected by `deadline` (a dropped SYN must not hold a step for the call's
// whole deadline).
absl::StatusOr<int> ConnectTcp(const std::string& host, int port, absl::Time deadline);

// Turns Nagle's algorithm off: a frame's header and payload leave at once (step frames are
// written whole, so nothing is gained by waiting for more).
void SetTcpNoDelay(int fd);

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_STEP_TCP_H_
