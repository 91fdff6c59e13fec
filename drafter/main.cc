// splitspec-drafter: serves the Drafter gRPC service with a draft-model or n-gram proposer.
//   splitspec-drafter --model DIR --port P [--device cpu|cuda|cuda:N]
//   splitspec-drafter --ngram [--ngram-min 1 --ngram-max 4] --port P
// Other flags: --host (127.0.0.1), --max-draft-tokens (64), --kv-blocks (1024), --block-size
// (16), --threads (0 = all cores), --drain-seconds (10), --session-lease-seconds (300; idle
// sessions are reclaimed after it, <= 0 = never), --max-sessions (1024), --max-history-tokens
// (4194304, across all sessions; 0 = no cap), --metrics-port (9401; 0 = a free port,
// -1 = no metrics server), --metrics-host (--host).
// Prints "splitspec-drafter listening on HOST:PORT" once serving (--port 0 picks a free port),
// then "splitspec-drafter metrics on HOST:PORT" (GET /metrics);
// SIGTERM/SIGINT drain in-flight calls and exit 0. Errors in the flags, and devices this build
// or machine lacks (--device cuda without CUDA or without a GPU), exit 2 with the reason;
// failures to load the draft model exit 1.
#include <climits>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/engine/cuda/select_backend.h"
#include "common/engine/kv/kv_cache.h"
#include "common/engine/model/llama_model.h"
#include "common/metrics/metrics_http_server.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/step_pickup_metrics.h"
#include "common/metrics/worker_metrics.h"
#include "common/rpc/flags.h"
#include "common/rpc/server.h"
#include "common/rpc/serving_flags.h"
#include "drafter/draft_model_proposer.h"
#include "drafter/drafter_core.h"
#include "drafter/drafter_service.h"
#include "drafter/ngram_proposer.h"
#include "drafter/suffix_proposer.h"

namespace {

using splitspec::drafter::Proposer;

constexpr char kUsage[] =
    "usage: splitspec-drafter --model DIR [--device cpu|cuda|cuda:N] [flags]\n"
    "       splitspec-drafter --ngram [--ngram-min N] [--ngram-max N] [flags]\n"
    "       splitspec-drafter --suffix [--suffix-cache-tokens N] [flags]\n"
    "\n"
    "Serves the Drafter gRPC service: draft tokens from a small model, n-gram matches or suffix decoding.\n"
    "\n"
    "  --model DIR              draft model directory (config.json, *.safetensors, tokenizer.model)\n"
    "  --device cpu|cuda|cuda:N where the draft model runs (cpu)\n"
    "  --quantize none|int8     int8: quantize the draft's matrices at load (Q8_0) (none)\n"
    "  --ngram                  propose from n-gram matches in the request's own tokens (no model)\n"
    "  --ngram-min N            shortest n-gram to match (1)\n"
    "  --ngram-max N            longest n-gram to match (4)\n"
    "  --suffix                 suffix decoding: the most frequent continuations of the current suffix in the\n"
    "                           request's own tokens and in a shared cache of finished requests (no model)\n"
    "  --suffix-cache-tokens N  bound of that shared cache, oldest requests evicted first (1048576; 0 = none)\n"
    "  --host H                 address to listen on (127.0.0.1); unix:///PATH = a Unix socket\n"
    "  --port P                 gRPC port (50052; 0 = a free port)\n"
    "  --max-draft-tokens K     largest proposal (chain length or tree nodes) per request and step (64)\n"
    "  --kv-blocks N            KV-cache blocks of the draft model (1024)\n"
    "  --block-size N           tokens per KV-cache block (16)\n"
    "  --kv-dtype f32|f16       how the draft's KV cache stores K and V: f16 halves its memory and reads (CPU only) (f32)\n"
    "  --threads N              CPU threads (0 = all cores)\n"
    "  --drain-seconds S        on SIGTERM/SIGINT, how long in-flight calls may finish (10)\n"
    "  --session-lease-seconds S  idle sessions are reclaimed after S seconds (300; <= 0 = never)\n"
    "  --max-sessions N         sessions held at once; more answer RESOURCE_EXHAUSTED (1024)\n"
    "  --max-history-tokens N   committed tokens held over all sessions (4194304)\n"
    "  --metrics-port P|0|-1    GET /metrics port (9401; 0 = a free port, -1 = off)\n"
    "  --metrics-host H         address of the metrics server (--host)\n"
    "  --tls-cert FILE          serve mutual TLS with this certificate (PEM; with --tls-key and\n"
    "                           --tls-client-ca: callers must present a certificate from that CA)\n"
    "  --tls-key FILE           the certificate's private key (PEM)\n"
    "  --tls-client-ca FILE     CA that client certificates must chain to (PEM)\n"
    "  --tls-reload-seconds S   how often the TLS files are read again, so a rotated certificate\n"
    "                           serves new connections without a restart (60)\n"
    "  --health-port P|0        also serve grpc.health.v1 alone, in plaintext, on this port (for\n"
    "                           probes without a certificate; off by default, 0 = a free port)\n"
    "  --enable-reflection      gRPC server reflection (off: it lists every method to any caller)\n"
    "  --step-socket on|off     with a unix:// --host and no TLS, also serve Propose on PATH.step, a\n"
    "                           plain socket with no thread hand-offs for a router on this host (on)\n"
    "  --step-port P|0          with a TCP --host and no TLS, also serve Propose on a step socket at\n"
    "                           this TCP port (0 = a free one), which GetInfo reports to routers;\n"
    "                           plaintext, like the gRPC port without TLS (off by default)\n"
    "  --step-spin-us US        on the step socket, poll for the next request from US before to US\n"
    "                           after it is due (from the last gaps; up to 8x wider where they\n"
    "                           wandered), sleeping otherwise (300; 0 = always sleep)\n"
    "  --help                   print this help and exit\n"
    "\n"
    "Prints \"splitspec-drafter listening on HOST:PORT\" once serving. Flag errors and devices this\n"
    "build or machine lacks exit 2; a draft model that does not load exits 1.\n";

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "error: %s\n%s", std::string(status.message()).c_str(), kUsage);
  return 2;
}

int Run(const splitspec::rpc::Flags& flags) {
  const std::string model = flags.GetString("model");
  const bool ngram = flags.Has("ngram");
  const bool has_device = flags.Has("device");
  const std::string device = flags.GetString("device", "cpu");
  const bool has_quantize = flags.Has("quantize");
  const std::string quantize = flags.GetString("quantize", "none");
  const bool has_kv_dtype = flags.Has("kv-dtype");
  const std::string kv_dtype = flags.GetString("kv-dtype", "f32");
  auto ngram_min = flags.GetIntInRange("ngram-min", 1, 1, INT_MAX);
  auto ngram_max = flags.GetIntInRange("ngram-max", 4, 1, INT_MAX);
  auto port = flags.GetIntInRange("port", 50052, 0, 65535);
  auto max_draft = flags.GetIntInRange("max-draft-tokens", 64, 0, splitspec::rpc::kMaxDraftTokensFlag);
  auto kv_blocks = flags.GetIntInRange("kv-blocks", 1024, 1, INT_MAX);
  auto block_size = flags.GetIntInRange("block-size", 16, 1, splitspec::rpc::kMaxKvBlockSize);
  auto threads = flags.GetIntInRange("threads", 0, 0, splitspec::rpc::kMaxWorkerThreads);
  auto drain = flags.GetDoubleAtLeast("drain-seconds", 10, 0);
  auto lease = flags.GetDouble("session-lease-seconds", 300);
  auto max_sessions = flags.GetIntInRange("max-sessions", 1024, 1, INT_MAX);
  auto max_history = flags.GetIntInRange("max-history-tokens", 4 << 20, 1, INT_MAX);
  const std::string host = flags.GetString("host", "127.0.0.1");
  auto metrics_port = flags.GetInt("metrics-port", splitspec::metrics::kDrafterMetricsPort);
  const std::string metrics_host = flags.GetString("metrics-host", splitspec::rpc::IsUnixSocket(host) ? "127.0.0.1" : host);
  auto serving = splitspec::rpc::ParseWorkerServing(flags);
  const absl::StatusOr<bool> step_socket = flags.GetOnOff("step-socket", true);
  const bool suffix = flags.Has("suffix");
  auto suffix_cache = flags.GetIntInRange("suffix-cache-tokens", 1 << 20, 0, INT_MAX);
  for (const absl::Status& s : {serving.status(), step_socket.status(), suffix_cache.status(), ngram_min.status(), ngram_max.status(), port.status(), max_draft.status(),
                                kv_blocks.status(), block_size.status(), threads.status(), drain.status(),
                                lease.status(), max_sessions.status(), max_history.status(),
                                metrics_port.status(), flags.CheckAllUsed()}) {
    if (!s.ok()) return Fail(s);
  }
  serving->step_socket = *step_socket;
  if (static_cast<int>(ngram) + static_cast<int>(suffix) + static_cast<int>(!model.empty()) != 1) {
    return Fail(absl::InvalidArgumentError("give exactly one of --model DIR, --ngram or --suffix"));
  }
  if ((ngram || suffix) && has_device) {
    return Fail(absl::InvalidArgumentError("--device goes with --model (the lookup drafters run no model)"));
  }
  if ((ngram || suffix) && has_quantize) {
    return Fail(absl::InvalidArgumentError("--quantize goes with --model (the lookup drafters run no model)"));
  }
  if ((ngram || suffix) && has_kv_dtype) {
    return Fail(absl::InvalidArgumentError("--kv-dtype goes with --model (the lookup drafters run no model)"));
  }
  if (absl::Status s = splitspec::engine::CheckDevice(device); !s.ok()) return Fail(s);
  auto quantization = splitspec::engine::ParseWeightQuantization(quantize);
  if (!quantization.ok()) return Fail(quantization.status());
  auto kv_element = splitspec::engine::ParseKvDType(kv_dtype);
  if (!kv_element.ok()) return Fail(kv_element.status());

  std::unique_ptr<Proposer> proposer;
  if (suffix) {
    splitspec::drafter::SuffixOptions options;
    options.cache_tokens = *suffix_cache;
    auto created = splitspec::drafter::SuffixProposer::Create(options);
    if (!created.ok()) return Fail(created.status());
    proposer = std::move(*created);
  } else if (ngram) {
    splitspec::spec::NgramMatcherOptions options;
    options.min_n = *ngram_min;
    options.max_n = *ngram_max;
    auto created = splitspec::drafter::NgramProposer::Create(options);
    if (!created.ok()) return Fail(created.status());
    proposer = std::move(*created);
  } else {
    splitspec::drafter::DraftModelOptions options;
    options.model_dir = model;
    options.kv_blocks = *kv_blocks;
    options.block_size = *block_size;
    options.n_threads = *threads;
    options.device = device;
    options.quantize = *quantization;
    options.kv_dtype = *kv_element;
    auto created = splitspec::drafter::DraftModelProposer::Create(options);
    if (!created.ok()) {
      std::fprintf(stderr, "error: loading draft model %s: %s\n", model.c_str(),
                   std::string(created.status().message()).c_str());
      return 1;
    }
    proposer = std::move(*created);
  }
  splitspec::drafter::DrafterOptions core_options;
  core_options.max_draft_tokens = *max_draft;
  core_options.session_lease_seconds = *lease;
  core_options.max_sessions = *max_sessions;
  core_options.max_history_tokens = *max_history;
  splitspec::drafter::DrafterCore core(std::move(proposer), core_options);
  splitspec::metrics::MetricsRegistry registry;
  auto worker_metrics = splitspec::metrics::WorkerMetrics::Create(registry, splitspec::metrics::WorkerRole::kDrafter);
  if (!worker_metrics.ok()) return Fail(worker_metrics.status());
  auto pickup_metrics =
      splitspec::metrics::StepPickupMetrics::Create(registry, splitspec::metrics::StepPickupMetrics::Frames::kRequests);
  if (!pickup_metrics.ok()) return Fail(pickup_metrics.status());
  splitspec::drafter::DrafterService service(&core, worker_metrics->get());
  auto metrics_server = splitspec::metrics::StartMetricsServer(registry, metrics_host, *metrics_port);
  if (!metrics_server.ok()) {
    std::fprintf(stderr, "error: %s (--metrics-port)\n", std::string(metrics_server.status().message()).c_str());
    return 1;
  }

  splitspec::rpc::ServerOptions server_options;
  server_options.address = splitspec::rpc::JoinHostPort(host, *port);
  server_options.drain_timeout = absl::Seconds(*drain);
  serving->ApplyTo(&server_options);
  server_options.step_handler = service.StepHandler();
  server_options.on_step_port = [&service](int port, uint64_t token) { service.set_step_port(port, token); };
  server_options.step_pickup_observer = (*pickup_metrics)->Observer();
  auto server = splitspec::rpc::Server::Start(server_options, {&service}, {"splitspec.v1.Drafter"});
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("splitspec-drafter listening on %s (%s, %s)\n", (*server)->address().c_str(),
              core.Info().model_name.c_str(), serving->Describe().c_str());
  if (*metrics_server != nullptr) {
    std::printf("splitspec-drafter metrics on %s\n",
                splitspec::rpc::JoinHostPort(metrics_host, (*metrics_server)->port()).c_str());
  }
  if ((*server)->health_port() >= 0) std::printf("splitspec-drafter health on port %d\n", (*server)->health_port());
  if (!(*server)->step_socket_path().empty()) {
    std::printf("splitspec-drafter step socket %s\n", (*server)->step_socket_path().c_str());
  }
  if ((*server)->step_port() != 0) std::printf("splitspec-drafter step socket on port %d\n", (*server)->step_port());
  std::fflush(stdout);
  const int signal_number = splitspec::rpc::WaitForTerminationSignal();
  std::fprintf(stderr, "splitspec-drafter: signal %d, draining\n", signal_number);
  (*server)->Shutdown();
  if (*metrics_server != nullptr) (*metrics_server)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (splitspec::rpc::HelpRequested(argc, argv)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  // Before any thread exists, so every gRPC and OpenMP thread inherits the blocked mask.
  splitspec::rpc::BlockTerminationSignals();
  std::set<std::string> boolean_flags = splitspec::rpc::WorkerServingBooleanFlags();
  boolean_flags.insert("ngram");
  boolean_flags.insert("suffix");
  auto flags = splitspec::rpc::Flags::Parse(argc, argv, boolean_flags);
  if (!flags.ok()) return Fail(flags.status());
  return Run(*flags);
}
