// Server bootstrap shared by the three services: listening port (0 = pick a free one), the
// grpc.health.v1 health service, server reflection (for grpcurl), and graceful drain.
//
// Shutdown sequence (SIGTERM/SIGINT in the mains): health turns NOT_SERVING, the server stops
// accepting calls, in-flight calls get `drain_timeout` to finish, then are cancelled.
#ifndef SPLITSPEC_COMMON_RPC_SERVER_H_
#define SPLITSPEC_COMMON_RPC_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace splitspec::rpc {

struct ServerOptions {
  std::string address = "127.0.0.1:0";  // host:port; port 0 picks a free port
  int max_message_bytes = 64 << 20;     // draft probabilities can be large
  absl::Duration drain_timeout = absl::Seconds(10);
};

// Thread-safe: Shutdown and Wait may be called from any thread; Shutdown is idempotent.
class Server {
 public:
  // Builds and starts a server for `services` (not owned; they must outlive the server) plus
  // health and reflection. `service_names` are the fully qualified names health reports on
  // (besides the overall "" entry). UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                       const std::vector<grpc::Service*>& services,
                                                       const std::vector<std::string>& service_names);
  ~Server();

  int port() const { return port_; }
  // "host:port" with the port actually bound.
  const std::string& address() const { return address_; }

  // Drains (see the file comment) and returns when the server has stopped.
  void Shutdown();
  // Blocks until Shutdown completed.
  void Wait();

 private:
  Server(const ServerOptions& options, std::unique_ptr<grpc::Server> server, int port, std::string address,
         std::vector<std::string> service_names);

  ServerOptions options_;
  std::unique_ptr<grpc::Server> server_;
  int port_;
  std::string address_;
  std::vector<std::string> service_names_;
  std::atomic<bool> shut_down_{false};
};

// Blocks SIGINT and SIGTERM in the calling thread. Call first thing in main, before any thread
// exists, so every thread inherits the mask and the signals wait for WaitForTerminationSignal.
void BlockTerminationSignals();
// Returns the signal number once SIGINT or SIGTERM arrives.
int WaitForTerminationSignal();

// "127.0.0.1:P" style address from a --host/--port pair.
std::string JoinHostPort(const std::string& host, int port);
// "unix:PATH" / "unix:///ABSOLUTE/PATH": a Unix domain socket (services on one host skip the
// TCP stack); JoinHostPort returns such a host as it is, without a port.
bool IsUnixSocket(const std::string& address);

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_SERVER_H_
