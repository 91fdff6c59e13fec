// Server bootstrap (see server.h).
#include "common/rpc/server.h"

#include <dlfcn.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/resolve.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace splitspec::rpc {
namespace {

// Replaces the port of "host:port" (IPv6 hosts come bracketed, so the last ':' splits).
std::string WithPort(const std::string& address, int port) {
  if (IsUnixSocket(address)) return address;
  const size_t colon = address.rfind(':');
  const std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  return absl::StrCat(host, ":", port);
}

// The step socket `options` ask for beside the gRPC address: a Unix socket beside a unix://
// address, a TCP port beside a TCP one; null when none is asked for.
absl::StatusOr<std::unique_ptr<StepSocketServer>> StartStepSocket(const ServerOptions& options) {
  constexpr int kMaxConnections = 16;
  if (IsUnixSocket(options.address)) {
    if (!options.step_socket) return std::unique_ptr<StepSocketServer>();
    return StepSocketServer::Start(StepSocketPath(options.address), options.step_handler, kMaxConnections,
                                   options.step_spin, options.step_pickup_observer);
  }
  if (options.step_port < 0 || !options.step_socket) return std::unique_ptr<StepSocketServer>();
  absl::StatusOr<std::pair<std::string, int>> host_port = SplitHostPort(options.address);
  if (!host_port.ok()) return host_port.status();
  return StepSocketServer::StartTcp(host_port->first, options.step_port, options.step_handler, kMaxConnections,
                                    options.step_spin, options.step_pickup_observer);
}

}  // namespace

absl::Status ValidateTlsFiles(const TlsFiles& files) {
  if (!files.enabled()) return absl::OkStatus();
  if (files.cert.empty() || files.key.empty() || files.ca.empty()) {
    return absl::InvalidArgumentError("TLS needs a certificate, its key and a CA file (all three)");
  }
  if (files.reload_seconds < 1) return absl::InvalidArgumentError("the TLS reload interval must be >= 1 s");
  for (const std::string* path : {&files.cert, &files.key, &files.ca}) {
    if (absl::StatusOr<std::string> pem = ReadPemFile(*path); !pem.ok()) return pem.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream contents;
  contents << in.rdbuf();
  if (contents.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a PEM file"));
  }
  return contents.str();
}

namespace {

// gRPC's reflection library registers its plugin for every server built after it is loaded
// (a static initializer), so linking it would turn reflection on for everyone. It is loaded
// only when asked for.
absl::Status LoadReflection() {
  for (const char* name : {"libgrpc++_reflection.so.1.51", "libgrpc++_reflection.so"}) {
    if (dlopen(name, RTLD_NOW | RTLD_GLOBAL) != nullptr) return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("server reflection needs libgrpc++_reflection: ", dlerror()));
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(const TlsFiles& files) {
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  if (absl::Status s = ValidateTlsFiles(files); !s.ok()) return s;
  // The watcher reads the files now and every reload_seconds; each handshake uses its latest.
  auto files_watcher = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.ca, static_cast<unsigned int>(files.reload_seconds));
  grpc::experimental::TlsServerCredentialsOptions options(files_watcher);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace

// grpc.health.v1 Check for the health-only port: the main server's status ("" and the service
// names), mirrored by Server::SetHealth. A service of its own (not gRPC's default one, which
// needs a server with other synchronous methods) keeps that port free of anything else.
class Server::HealthOnly final : public grpc::health::v1::Health::Service {
 public:
  explicit HealthOnly(std::vector<std::string> names) : names_(std::move(names)) {}
  void Set(bool serving) { serving_.store(serving); }
  grpc::Status Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override {
    const std::string& name = request->service();
    if (!name.empty() && std::find(names_.begin(), names_.end(), name) == names_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
    }
    response->set_status(serving_.load() ? grpc::health::v1::HealthCheckResponse::SERVING
                                         : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    return grpc::Status::OK;
  }

 private:
  const std::vector<std::string> names_;
  std::atomic<bool> serving_{false};
};

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      const std::vector<grpc::Service*>& services,
                                                      const std::vector<std::string>& service_names) {
  if (IsUnixSocket(options.address) && options.step_port >= 0) {
    return absl::InvalidArgumentError(
        "a step port is for a TCP address; beside a Unix socket the step socket is its path plus .step");
  }
  grpc::EnableDefaultHealthCheckService(true);
  // Process-wide: every server built after this offers reflection.
  if (options.reflection) {
    if (absl::Status s = LoadReflection(); !s.ok()) return s;
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = ServerCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();

  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(options.address, *credentials, &selected_port);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || selected_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.address,
                                               " (address in use or malformed?)"));
  }
  std::unique_ptr<Server> out(new Server(options, std::move(server), selected_port,
                                         WithPort(options.address, selected_port), service_names));
  if (options.health_port >= 0) {
    // Only the health service is registered here: the port serves nothing else.
    const std::string host = IsUnixSocket(options.address) ? "127.0.0.1"
                             : options.address.substr(0, options.address.rfind(':'));
    out->health_only_ = std::make_unique<HealthOnly>(service_names);
    grpc::ServerBuilder health_builder;
    // The default health service would be a second registration of the same methods.
    grpc::EnableDefaultHealthCheckService(false);
    health_builder.RegisterService(out->health_only_.get());
    int health_port = 0;
    health_builder.AddListeningPort(absl::StrCat(host, ":", options.health_port), grpc::InsecureServerCredentials(),
                                    &health_port);
    out->health_server_ = health_builder.BuildAndStart();
    grpc::EnableDefaultHealthCheckService(true);
    if (out->health_server_ == nullptr || health_port == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on health port ", options.health_port));
    }
    out->health_port_ = health_port;
  }
  if (options.step_handler && !options.tls.enabled()) {
    absl::StatusOr<std::unique_ptr<StepSocketServer>> step = StartStepSocket(options);
    if (!step.ok()) return step.status();
    out->step_server_ = *std::move(step);
    if (out->step_port() != 0 && options.on_step_port) {
      options.on_step_port(out->step_port(), out->step_server_->token());
    }
  }
  out->SetHealth(true);
  return out;
}

Server::Server(const ServerOptions& options, std::unique_ptr<grpc::Server> server, int port, std::string address,
               std::vector<std::string> service_names)
    : options_(options),
      server_(std::move(server)),
      port_(port),
      address_(std::move(address)),
      service_names_(std::move(service_names)) {}

Server::~Server() { Shutdown(); }

void Server::SetHealth(bool serving) {
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
    health->SetServingStatus(serving);
    for (const std::string& name : service_names_) health->SetServingStatus(name, serving);
  }
  if (health_only_ != nullptr) health_only_->Set(serving);
}

void Server::Shutdown() {
  if (shut_down_.exchange(true)) {
    server_->Wait();
    return;
  }
  // Health first, so load balancers and our router stop sending before the port closes.
  SetHealth(false);
  // A step call in progress is answered; later ones find the socket closed, as a draining
  // gRPC server refuses new calls.
  if (step_server_ != nullptr) step_server_->Stop();
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::microseconds(absl::ToInt64Microseconds(options_.drain_timeout));
  server_->Shutdown(deadline);
  server_->Wait();
  if (health_server_ != nullptr) {
    health_server_->Shutdown(std::chrono::system_clock::now());
    health_server_->Wait();
  }
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
