// Server bootstrap shared by the three services: listening port (0 = pick a free one), the
// grpc.health.v1 health service, optional server reflection (for grpcurl), mutual TLS, a
// plaintext health-only port, and graceful drain.
//
// Shutdown sequence (SIGTERM/SIGINT in the mains): health turns NOT_SERVING, the server stops
// accepting calls, in-flight calls get `drain_timeout` to finish, then are cancelled.
#ifndef SPLITSPEC_COMMON_RPC_SERVER_H_
#define SPLITSPEC_COMMON_RPC_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/step_socket_server.h"

namespace splitspec::rpc {

// PEM files for mutual TLS: this side's certificate chain and key, and the CA the other
// side's certificate must chain to. All three or none (plaintext). They are read again every
// `reload_seconds` (gRPC's file watcher), so a rotated certificate (a Kubernetes Secret
// updated by cert-manager) is used for new connections without a restart; a set that fails to
// load keeps the last good one.
struct TlsFiles {
  std::string cert;
  std::string key;
  std::string ca;
  int reload_seconds = kDefaultTlsReloadSeconds;
  static constexpr int kDefaultTlsReloadSeconds = 60;
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};
// INVALID_ARGUMENT unless all three or none are set; NOT_FOUND for a file that cannot be read.
absl::Status ValidateTlsFiles(const TlsFiles& files);
absl::StatusOr<std::string> ReadPemFile(const std::string& path);

struct ServerOptions {
  std::string address = "127.0.0.1:0";  // host:port; port 0 picks a free port
  int max_message_bytes = 64 << 20;     // draft probabilities can be large
  absl::Duration drain_timeout = absl::Seconds(10);
  // Set: the port requires a client certificate that chains to tls.ca (mutual TLS).
  TlsFiles tls;
  // >= 0: a second, plaintext server on this port (0 = a free one) that answers only
  // grpc.health.v1, mirroring the main server's status, for probes that hold no certificate.
  int health_port = -1;
  // Server reflection (grpcurl): off unless asked for, it lists every method to anyone.
  bool reflection = false;
  // The worker's per-step method on a step socket (step_socket_wire.h): at StepSocketPath(address)
  // beside a unix:// address (unless step_socket is off), or on TCP port step_port of the
  // address's host beside a TCP address (step_tcp.h; 0 = a free one, -1 = none). Never with TLS
  // (the socket has none). Unset: none.
  StepHandler step_handler;
  bool step_socket = true;
  int step_port = -1;
  // Told the TCP step socket's port and token (StepSocketServer::token) once it is bound,
  // before the server reports healthy (the services say them in GetInfo, where routers look).
  std::function<void(int port, uint64_t token)> on_step_port;
  // How long a step socket connection polls for the next request after an answer (RequestSpin).
  absl::Duration step_spin = absl::ZeroDuration();
  // How the step socket's requests were waited for (StepSocketServer::Start's `on_pickup`).
  PickupObserver step_pickup_observer;
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
  // The health-only port (-1 without one).
  int health_port() const { return health_port_; }
  // "host:port" with the port actually bound.
  const std::string& address() const { return address_; }
  // The step socket's path, "" without one.
  std::string step_socket_path() const { return step_server_ != nullptr ? step_server_->path() : ""; }
  // The step socket's TCP port, 0 without one.
  int step_port() const { return step_server_ != nullptr ? step_server_->port() : 0; }

  // Drains (see the file comment) and returns when the server has stopped.
  void Shutdown();
  // Blocks until Shutdown completed.
  void Wait();

 private:
  Server(const ServerOptions& options, std::unique_ptr<grpc::Server> server, int port, std::string address,
         std::vector<std::string> service_names);
  void SetHealth(bool serving);

  ServerOptions options_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> health_server_;  // the plaintext health-only port
  class HealthOnly;
  std::unique_ptr<HealthOnly> health_only_;  // its grpc.health.v1 service
  std::unique_ptr<StepSocketServer> step_server_;
  int health_port_ = -1;
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
