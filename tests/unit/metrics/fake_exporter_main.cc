// metrics_fake_exporter: serves synthetic router, drafter and verifier metrics on three ports,
// updated a few times a second, so the dashboard and tests/integration/prometheus_scrape.sh can
// be exercised against a real Prometheus before the services exist.
//
//   metrics_fake_exporter [--router-port 9400] [--drafter-port 9401] [--verifier-port 9402]
//                         [--host 127.0.0.1] [--seconds 0 (= until SIGINT/SIGTERM)]
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "common/metrics/metrics_http_server.h"
#include "tests/unit/metrics/sample_traffic.h"

namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

int Run(int argc, char** argv) {
  using namespace splitspec::metrics;
  int ports[3] = {kRouterMetricsPort, kDrafterMetricsPort, kVerifierMetricsPort};
  std::string host = "127.0.0.1";
  double seconds = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--router-port") {
      ports[0] = std::atoi(value);
    } else if (flag == "--drafter-port") {
      ports[1] = std::atoi(value);
    } else if (flag == "--verifier-port") {
      ports[2] = std::atoi(value);
    } else if (flag == "--host") {
      host = value;
    } else if (flag == "--seconds") {
      seconds = std::atof(value);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }

  MetricsRegistry router_registry, drafter_registry, verifier_registry;
  auto router = testing::CreateRouterSets(router_registry);
  auto drafter = WorkerMetrics::Create(drafter_registry, WorkerRole::kDrafter);
  auto verifier = WorkerMetrics::Create(verifier_registry, WorkerRole::kVerifier);
  if (!router.ok() || !drafter.ok() || !verifier.ok()) {
    std::fprintf(stderr, "cannot create metric sets\n");
    return 1;
  }
  const MetricsRegistry* registries[3] = {&router_registry, &drafter_registry, &verifier_registry};
  std::unique_ptr<MetricsHttpServer> servers[3];
  for (int i = 0; i < 3; ++i) {
    MetricsHttpServerOptions options;
    options.host = host;
    options.port = ports[i];
    servers[i] = std::make_unique<MetricsHttpServer>(*registries[i], options);
    if (absl::Status s = servers[i]->Start(); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::printf("serving on %s:%d\n", host.c_str(), servers[i]->port());
  }
  std::fflush(stdout);

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::mt19937 rng(12345);
  const auto start = std::chrono::steady_clock::now();
  while (!g_stop.load()) {
    testing::FeedRouterSteps(*router, 5, rng);
    testing::FeedWorkerSteps(**drafter, WorkerRole::kDrafter, 5, rng);
    testing::FeedWorkerSteps(**verifier, WorkerRole::kVerifier, 5, rng);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 0 && elapsed >= seconds) break;
  }
  for (auto& server : servers) server->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
