// Server bootstrap (see server.h).
#include "common/rpc/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace splitspec::rpc {
namespace {

// Replaces the port of "host:port" (IPv6 hosts come bracketed, so the last ':' splits).
std::string WithPort(const std::string& address, int port) {
  if (IsUnixSocket(address)) return address;
  const size_t colon = address.rfind(':');
  const std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  return absl::StrCat(host, ":", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      const std::vector<grpc::Service*>& services,
                                                      const std::vector<std::string>& service_names) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &selected_port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || selected_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.address,
                                               " (address in use or malformed?)"));
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus(true);
    for (const std::string& name : service_names) health->SetServingStatus(name, true);
  }
  return std::unique_ptr<Server>(new Server(options, std::move(server), selected_port,
                                            WithPort(options.address, selected_port), service_names));
}

Server::Server(const ServerOptions& options, std::unique_ptr<grpc::Server> server, int port, std::string address,
               std::vector<std::string> service_names)
    : options_(options),
      server_(std::move(server)),
      port_(port),
      address_(std::move(address)),
      service_names_(std::move(service_names)) {}

Server::~Server() { Shutdown(); }

void Server::Shutdown() {
  if (shut_down_.exchange(true)) {
    server_->Wait();
    return;
  }
  // Health first, so load balancers and our router stop sending before the port closes.
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(false);
    for (const std::string& name : service_names_) health->SetServingStatus(name, false);
  }
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::microseconds(absl::ToInt64Microseconds(options_.drain_timeout));
  server_->Shutdown(deadline);
  server_->Wait();
}

void Server::Wait() { server_->Wait(); }

void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int signal_number = 0;
  while (sigwait(&set, &signal_number) != 0) {
  }
  return signal_number;
}

std::string JoinHostPort(const std::string& host, int port) {
  if (IsUnixSocket(host)) return host;  // a Unix socket has no port
  if (host.find(':') != std::string::npos && host.front() != '[') return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

bool IsUnixSocket(const std::string& address) { return address.rfind("unix:", 0) == 0; }

}  // namespace splitspec::rpc
