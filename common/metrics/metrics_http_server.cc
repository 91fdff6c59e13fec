// MetricsHttpServer on cpp-httplib.
#include "common/metrics/metrics_http_server.h"

#include <sys/socket.h>

#include <chrono>
#include <exception>

#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace splitspec::metrics {
namespace {

int HttpStatusFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

constexpr char kJsonContentType[] = "application/json";

}  // namespace

MetricsHttpServer::MetricsHttpServer(const MetricsRegistry& registry,
                                     MetricsHttpServerOptions options)
    : registry_(registry), options_(std::move(options)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::Status MetricsHttpServer::AddJsonEndpoint(const std::string& path, JsonHandler handler) {
  if (server_ != nullptr) {
    return absl::FailedPreconditionError("AddJsonEndpoint after Start");
  }
  if (path.empty() || path[0] != '/' || path == "/metrics") {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint path '", path, "' must start with '/' and not be /metrics"));
  }
  if (!handler) return absl::InvalidArgumentError("endpoint handler is empty");
  for (const auto& [existing, unused] : json_endpoints_) {
    if (existing == path) {
      return absl::AlreadyExistsError(absl::StrCat("endpoint '", path, "' already added"));
    }
  }
  json_endpoints_.emplace_back(path, std::move(handler));
  return absl::OkStatus();
}

absl::Status MetricsHttpServer::Start() {
  if (server_ != nullptr) return absl::FailedPreconditionError("metrics server already started");
  if (options_.port < 0 || options_.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad metrics port ", options_.port));
  }
  if (options_.n_threads < 1) {
    return absl::InvalidArgumentError("metrics server needs at least one thread");
  }
  auto server = std::make_unique<httplib::Server>();
  const int n_threads = options_.n_threads;
  server->new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  // httplib's default socket options add SO_REUSEPORT, which lets a second process bind the same
  // port and silently take half the scrapes. Keep only SO_REUSEADDR (fast restarts), so a port
  // in use is an error.
  server->set_socket_options([](auto sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });

  server->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry_.Serialize(), kExpositionContentType);
  });
  for (const auto& [path, handler] : json_endpoints_) {
    // httplib matches patterns as regular expressions; endpoint paths are plain, so escape the
    // few metacharacters a path could hold.
    std::string pattern;
    for (char c : path) {
      if (std::string_view(".+*?()[]{}|^$\\").find(c) != std::string_view::npos) pattern += '\\';
      pattern += c;
    }
    const JsonHandler* fn = &handler;
    server->Get(pattern, [fn](const httplib::Request&, httplib::Response& res) {
      absl::StatusOr<nlohmann::json> body;
      try {
        body = (*fn)();
      } catch (const std::exception& e) {  // never let a handler's exception kill the thread
        body = absl::InternalError(e.what());
      }
      // Invalid UTF-8 (say, in a label value) is replaced instead of making dump() throw.
      constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
      if (body.ok()) {
        res.set_content(body->dump(-1, ' ', false, kReplace), kJsonContentType);
      } else {
        res.status = HttpStatusFor(body.status());
        res.set_content(nlohmann::json{{"error", std::string(body.status().message())}}.dump(
                            -1, ' ', false, kReplace),
                        kJsonContentType);
      }
    });
  }

  int port = options_.port;
  if (port == 0) {
    port = server->bind_to_any_port(options_.host);
    if (port <= 0) {
      return absl::UnavailableError(
          absl::StrCat("metrics server: cannot bind any port on '", options_.host, "'"));
    }
  } else if (!server->bind_to_port(options_.host, port)) {
    return absl::UnavailableError(absl::StrCat("metrics server: cannot bind ", options_.host, ":",
                                               port, " (port in use or address unavailable)"));
  }

  server_ = std::move(server);
  port_.store(port);
  listen_returned_.store(false);
  httplib::Server* raw = server_.get();
  thread_ = std::thread([this, raw] {
    raw->listen_after_bind();
    listen_returned_.store(true);
  });
  // httplib::Server::stop() is a no-op until the listen loop has marked itself running, so wait
  // for that here; otherwise a Stop() right after Start() could leave the thread listening.
  // The loop either marks itself running or returns at once, so this wait is short.
  while (!raw->is_running() && !listen_returned_.load()) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (!raw->is_running()) {
    raw->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
    port_.store(0);
    return absl::InternalError("metrics server: listen loop failed to start");
  }
  return absl::OkStatus();
}

void MetricsHttpServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
  port_.store(0);
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartMetricsServer(const MetricsRegistry& registry,
                                                                      const std::string& host, int port) {
  if (port == -1) return nullptr;
  if (port < -1 || port > 65535) {
    return absl::InvalidArgumentError("--metrics-port must be a port, 0 (any free one) or -1 (off)");
  }
  MetricsHttpServerOptions options;
  options.host = host;
  options.port = port;
  auto server = std::make_unique<MetricsHttpServer>(registry, options);
  if (absl::Status s = server->Start(); !s.ok()) return s;
  return server;
}

}  // namespace splitspec::metrics
