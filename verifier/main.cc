// splitspec-verifier: serves the Verifier gRPC service over the target model.
//   splitspec-verifier --model DIR --port P
// Other flags: --host (127.0.0.1), --max-draft-tokens (64), --kv-blocks (1024), --block-size
// (16), --threads (0 = all cores), --drain-seconds (10), --metrics-port (9402; 0 = a free port,
// -1 = no metrics server), --metrics-host (--host).
// Prints "splitspec-verifier listening on HOST:PORT" once serving (--port 0 picks a free port),
// then "splitspec-verifier metrics on HOST:PORT" (GET /metrics);
// SIGTERM/SIGINT drain in-flight calls and exit 0.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/metrics/metrics_http_server.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/worker_metrics.h"
#include "common/rpc/flags.h"
#include "common/rpc/server.h"
#include "verifier/verifier_core.h"
#include "verifier/verifier_service.h"

namespace {

constexpr char kUsage[] =
    "usage: splitspec-verifier --model DIR [--port P] [--host H] [--max-draft-tokens K] [--kv-blocks N]\n"
    "       [--block-size N] [--threads N] [--drain-seconds S] [--metrics-port P|0|-1] [--metrics-host H]\n";

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "error: %s\n%s", std::string(status.message()).c_str(), kUsage);
  return 2;
}

int Run(const splitspec::rpc::Flags& flags) {
  splitspec::verifier::VerifierOptions options;
  options.model_dir = flags.GetString("model");
  auto port = flags.GetInt("port", 50051);
  auto max_draft = flags.GetInt("max-draft-tokens", 64);
  auto kv_blocks = flags.GetInt("kv-blocks", 1024);
  auto block_size = flags.GetInt("block-size", 16);
  auto threads = flags.GetInt("threads", 0);
  auto drain = flags.GetDouble("drain-seconds", 10);
  const std::string host = flags.GetString("host", "127.0.0.1");
  auto metrics_port = flags.GetInt("metrics-port", splitspec::metrics::kVerifierMetricsPort);
  const std::string metrics_host = flags.GetString("metrics-host", host);
  for (const absl::Status& s : {port.status(), max_draft.status(), kv_blocks.status(), block_size.status(),
                                threads.status(), drain.status(), metrics_port.status(), flags.CheckAllUsed()}) {
    if (!s.ok()) return Fail(s);
  }
  if (options.model_dir.empty()) return Fail(absl::InvalidArgumentError("--model DIR is required"));
  options.kv_blocks = *kv_blocks;
  options.block_size = *block_size;
  options.max_draft_tokens = *max_draft;
  options.n_threads = *threads;
  auto core = splitspec::verifier::VerifierCore::Create(options);
  if (!core.ok()) {
    std::fprintf(stderr, "error: loading target model %s: %s\n", options.model_dir.c_str(),
                 std::string(core.status().message()).c_str());
    return 1;
  }
  splitspec::metrics::MetricsRegistry registry;
  auto worker_metrics = splitspec::metrics::WorkerMetrics::Create(registry, splitspec::metrics::WorkerRole::kVerifier);
  if (!worker_metrics.ok()) return Fail(worker_metrics.status());
  splitspec::verifier::VerifierService service(core->get(), worker_metrics->get());
  auto metrics_server = splitspec::metrics::StartMetricsServer(registry, metrics_host, *metrics_port);
  if (!metrics_server.ok()) {
    std::fprintf(stderr, "error: %s (--metrics-port)\n", std::string(metrics_server.status().message()).c_str());
    return 1;
  }

  splitspec::rpc::ServerOptions server_options;
  server_options.address = splitspec::rpc::JoinHostPort(host, *port);
  server_options.drain_timeout = absl::Seconds(*drain);
  auto server = splitspec::rpc::Server::Start(server_options, {&service}, {"splitspec.v1.Verifier"});
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("splitspec-verifier listening on %s (%s)\n", (*server)->address().c_str(),
              (*core)->Info().model_name.c_str());
  if (*metrics_server != nullptr) {
    std::printf("splitspec-verifier metrics on %s\n",
                splitspec::rpc::JoinHostPort(metrics_host, (*metrics_server)->port()).c_str());
  }
  std::fflush(stdout);
  const int signal_number = splitspec::rpc::WaitForTerminationSignal();
  std::fprintf(stderr, "splitspec-verifier: signal %d, draining\n", signal_number);
  (*server)->Shutdown();
  if (*metrics_server != nullptr) (*metrics_server)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists, so every gRPC and OpenMP thread inherits the blocked mask.
  splitspec::rpc::BlockTerminationSignals();
  auto flags = splitspec::rpc::Flags::Parse(argc, argv, {});
  if (!flags.ok()) return Fail(flags.status());
  return Run(*flags);
}
