// MetricsHttpServer: serves GET /metrics (the registry's text exposition) and optional JSON
// endpoints (the router's /server_info) from a cpp-httplib server on a background thread.
// prometheus-cpp's own Exposer is not used: its civetweb workers crash next to OpenBLAS.
//
// Usage in a service's main:
//   metrics::MetricsHttpServerOptions opts;
//   opts.port = args.GetInt("metrics-port", metrics::kRouterMetricsPort);
//   metrics::MetricsHttpServer server(registry, opts);
//   server.AddJsonEndpoint("/server_info", [&] { return BuildServerInfo(); });
//   if (absl::Status s = server.Start(); !s.ok()) { ...report and exit... }
//
// Thread safety: AddJsonEndpoint, Start and Stop must be called from one thread (the owner);
// handlers run on the server's worker threads and must be thread-safe themselves. port() may be
// read from any thread after Start returned.
#ifndef SPLITSPEC_COMMON_METRICS_METRICS_HTTP_SERVER_H_
#define SPLITSPEC_COMMON_METRICS_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/metrics/metrics_registry.h"
#include "nlohmann/json.hpp"

namespace httplib {
class Server;
}  // namespace httplib

namespace splitspec::metrics {

// Default --metrics-port of each service (deploy/prometheus/prometheus.yml scrapes these).
inline constexpr int kRouterMetricsPort = 9400;
inline constexpr int kDrafterMetricsPort = 9401;
inline constexpr int kVerifierMetricsPort = 9402;

struct MetricsHttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;       // 0 picks a free port; port() reports it after Start
  int n_threads = 2;  // scrapes are rare and cheap: a small pool is enough
};

class MetricsHttpServer {
 public:
  // Returns the JSON body, or a status mapped to an HTTP error (NOT_FOUND 404, UNAVAILABLE 503,
  // INVALID_ARGUMENT 400, anything else 500) with body {"error": message}.
  using JsonHandler = std::function<absl::StatusOr<nlohmann::json>()>;

  // `registry` must outlive the server.
  MetricsHttpServer(const MetricsRegistry& registry, MetricsHttpServerOptions options);
  ~MetricsHttpServer();  // Stop()
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Adds GET `path` (must start with '/'; /metrics is reserved). Before Start only.
  absl::Status AddJsonEndpoint(const std::string& path, JsonHandler handler);

  // Binds and starts serving. Errors: bad options, the port in use (UNAVAILABLE, naming
  // host:port), or a second Start.
  absl::Status Start();
  // Stops accepting, finishes in-flight requests and joins the thread. Idempotent.
  void Stop();

  // The bound port (the chosen one when options.port was 0); 0 before Start.
  int port() const { return port_.load(); }

 private:
  const MetricsRegistry& registry_;
  const MetricsHttpServerOptions options_;
  std::vector<std::pair<std::string, JsonHandler>> json_endpoints_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<int> port_{0};
  std::atomic<bool> listen_returned_{false};
};

// The services' `--metrics-port` convention: -1 = no metrics endpoint (returns null), 0 = any
// free port, else that port. INVALID_ARGUMENT for another value, UNAVAILABLE when it is taken.
absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartMetricsServer(const MetricsRegistry& registry,
                                                                      const std::string& host, int port);

}  // namespace splitspec::metrics

#endif  // SPLITSPEC_COMMON_METRICS_METRICS_HTTP_SERVER_H_
