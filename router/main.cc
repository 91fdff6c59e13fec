// splitspec-router: the public Generate service over a verifier and drafter pools.
//   splitspec-router --verifier ADDR[,ADDR...] --drafter [NAME=]ADDR[,ADDR...] [--drafter ...] --port P
//                    --policy none|static:K|smartspec|... [--policy-config FILE]
// Other flags: --host (127.0.0.1), --tokenizer PATH (a tokenizer.json, tokenizer.model or model
// dir; default: the verifier's model dir, tokenizer.json there else tokenizer.model; "none" =
// token ids only), --latency-model FILE, --max-queue (256), --max-running (64), --max-k (8),
// --default-max-tokens (128), --worker-timeout-seconds (60),
// --wait-seconds (60: how long to wait for the verifier at start), --drain-seconds (30),
// --metrics-port (9400; 0 = a free port, -1 = no metrics server), --metrics-host (--host).
// Replicas (docs/reliability.md): several --verifier addresses are replicas of one target
// model; a new request goes to the one with the most free KV, and a failed one's requests are
// re-prefilled on another. Several addresses after a drafter pool's NAME= are replicas of that
// pool, its requests spread over them. dns:///HOST:PORT in either list stands for every address
// HOST resolves to, resolved again every --resolve-interval-seconds (10).
// --failover-wait-seconds (10: how long a request waits for a replica),
// --deadline-factor (8) and --deadline-floor-seconds (0.5): a worker call's deadline is factor
// x the latency model's prediction, at least the floor, at most --worker-timeout-seconds;
// --probe-interval-seconds (0.25: how often a failed replica is probed).
// OpenAI-compatible HTTP API (router/http): --http-port P (off by default; 0 = a free port),
// --http-host (--host), --api-key KEY or --api-key-file FILE (bearer key; none = open),
// --chat-template FILE (Jinja; default: tokenizer_config.json's chat_template in the model
// dir), --http-threads (64).
// Prints "splitspec-router listening on HOST:PORT" once serving (--port 0 picks a free port),
// then "splitspec-router metrics on HOST:PORT" (GET /metrics and GET /server_info there) and
// "splitspec-router OpenAI API on HOST:PORT".
// SIGTERM/SIGINT: stop accepting, let running requests finish (up to --drain-seconds), exit 0.
#include <climits>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/engine/chat_template/chat_template.h"
#include "common/engine/tokenizer/load_tokenizer.h"
#include "common/metrics/metrics_http_server.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/step_pickup_metrics.h"
#include "common/rpc/flags.h"
#include "common/rpc/periodic_task.h"
#include "common/rpc/resolve.h"
#include "common/rpc/server.h"
#include "common/rpc/serving_flags.h"
#include "common/rpc/worker_clients.h"
#include "router/clock.h"
#include "router/latency_model.h"
#include "router/http/openai_http_server.h"
#include "router/policy.h"
#include "router/drafter_discovery.h"
#include "router/router_core.h"
#include "router/verifier_discovery.h"
#include "router/service/grpc_workers.h"
#include "router/service/router_metrics.h"
#include "router/service/router_service.h"

namespace {

using namespace splitspec;  // NOLINT: a main over many of our namespaces

// Each alternative costs the drafter a branch of the draft made ahead; beyond a few, the
// outcomes left are too unlikely to pay for theirs.
constexpr int kMaxDraftAheadAlternatives = 8;
constexpr int kMaxHttpThreads = 4096;

constexpr char kUsage[] =
    "usage: splitspec-router --verifier ADDR[,ADDR...] [--drafter [NAME=]ADDR[,ADDR...] ...] [flags]\n"
    "\n"
    "Serves the public Generate gRPC service over a verifier (one or more replicas) and pools of drafters.\n"
    "\n"
    "  --verifier ADDR[,ADDR...]    the verifier's gRPC address (required); several = replicas of one model;\n"
    "                               dns:///HOST:PORT = one replica per address HOST resolves to, kept current\n"
    "  --drafter [NAME=]ADDR[,ADDR...]\n"
    "                               a drafter pool; repeat for several (default names: default, d0, d1, ...);\n"
    "                               further addresses are replicas of the pool (its requests spread over\n"
    "                               them); dns:///HOST:PORT = one replica per address, kept current\n"
    "  --host H                     address to listen on (127.0.0.1); unix:///PATH = a Unix socket\n"
    "  --port P                     gRPC port (50050; 0 = a free port)\n"
    "  --policy NAME                none|static:K|static-tree:D:N|smartspec|sglang-tiers|analytical|fsm|\n"
    "                               cache-fsm (none)\n"
    "  --policy-config FILE         JSON options of the policy and the acceptance estimator\n"
    "  --tokenizer PATH|none        tokenizer.json, tokenizer.model or a model dir (default: the\n"
    "                               verifier's model dir, tokenizer.json there else tokenizer.model;\n"
    "                               none = token ids only)\n"
    "  --latency-model FILE         fitted latency model (splitspec profile) for the cost-aware policies\n"
    "  --max-queue N                requests waiting for admission before new ones are refused (256)\n"
    "  --max-running N              requests decoding at once (64)\n"
    "  --max-k K                    largest draft a policy may choose: chain length or tree nodes (8)\n"
    "  --pipeline on|off            draft the next step's chains while this step verifies, where that\n"
    "                               is expected to pay (on)\n"
    "  --draft-ahead-alternatives N with the pipeline, also draft greedy requests' next step after\n"
    "                               up to N other outcomes of the step being verified (the\n"
    "                               drafter's best other token where the chain might stop), 0..8 (4)\n"
    "  --draft-ahead-sampled-alternatives N\n"
    "                               the same for sampled requests, 0..8 (2)\n"
    "  --step-sockets on|off        Verify and Propose to a worker addressed as unix://PATH over its\n"
    "                               step socket PATH.step, and to a worker addressed as HOST:PORT\n"
    "                               over the TCP step port it reports (--step-port) (no thread\n"
    "                               hand-offs; gRPC while absent; not with --worker-tls-*) (on)\n"
    "  --step-memory on|off         on a Unix step socket, pass the frames through memory shared\n"
    "                               with the worker (no system call while the reader polls) (on)\n"
    "  --step-spin-us US            on a step socket, poll for an answer from US before to US after\n"
    "                               it is due (up to 8x wider where recent round trips wandered)\n"
    "                               instead of sleeping: a sleeping thread wakes ~100 us late on a\n"
    "                               VM (300; 0 = always sleep)\n"
    "  --latency-residual on|off    learn per batch size what the refitted latency line misses (on)\n"
    "  --default-max-tokens N       max_tokens of requests that leave it 0 (128)\n"
    "  --worker-timeout-seconds S   longest deadline of a call to a worker (60)\n"
    "  --deadline-factor F          a call's deadline: F x the latency model's prediction (8)\n"
    "  --deadline-floor-seconds S   ... and at least S (0.5)\n"
    "  --failover-wait-seconds S    how long a request waits for a verifier replica (10)\n"
    "  --probe-interval-seconds S   how often a failed replica is probed (0.25)\n"
    "  --resolve-interval-seconds S how often dns:///HOST:PORT names in --verifier and --drafter are\n"
    "                               resolved again (10)\n"
    "  --wait-seconds S             how long to wait for the verifier at start (60)\n"
    "  --drain-seconds S            on SIGTERM/SIGINT, how long running requests may finish (30)\n"
    "  --metrics-port P|0|-1        GET /metrics and /server_info port (9400; 0 = a free port, -1 = off)\n"
    "  --metrics-host H             address of the metrics server (--host)\n"
    "  --http-port P|0              OpenAI-compatible HTTP API port (off by default; 0 = a free port)\n"
    "  --http-host H                address of the HTTP API (--host)\n"
    "  --api-key KEY                bearer key the gRPC and HTTP APIs require (authorization metadata /\n"
    "                               header \"Bearer KEY\"; default: none)\n"
    "  --api-key-file FILE          read the bearer key from FILE instead\n"
    "  --worker-tls-cert FILE       call the workers over mutual TLS: this router's certificate (PEM;\n"
    "                               with --worker-tls-key and --worker-tls-ca)\n"
    "  --worker-tls-key FILE        its private key (PEM)\n"
    "  --worker-tls-ca FILE         CA the workers' certificates must chain to (PEM)\n"
    "  --tls-cert FILE              serve the public gRPC API over mutual TLS (with --tls-key and\n"
    "                               --tls-client-ca)\n"
    "  --tls-key FILE               its private key (PEM)\n"
    "  --tls-client-ca FILE         CA that client certificates must chain to (PEM)\n"
    "  --tls-reload-seconds S       how often all TLS files (--tls-* and --worker-tls-*) are read again,\n"
    "                               so rotated certificates serve new connections without a restart (60)\n"
    "  --health-port P|0            also serve grpc.health.v1 alone, in plaintext, on this port (off)\n"
    "  --enable-reflection          gRPC server reflection (off)\n"
    "  --chat-template FILE         Jinja chat template (default: tokenizer_config.json's in the model dir)\n"
    "  --http-threads N             HTTP worker threads; each in-flight request holds one (64)\n"
    "  --help                       print this help and exit\n"
    "\n"
    "Prints \"splitspec-router listening on HOST:PORT\" once serving, then the metrics address\n"
    "and \"splitspec-router OpenAI API on HOST:PORT\" with --http-port.\n";

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "error: %s\n%s", std::string(status.message()).c_str(), kUsage);
  return 2;
}

int Die(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "error: %s: %s\n", what.c_str(), std::string(status.message()).c_str());
  return 1;
}

int Run(const rpc::Flags& flags) {
  const std::string verifier_address = flags.GetString("verifier");
  const std::vector<std::string> drafter_flags = flags.GetAll("drafter");
  const std::string host = flags.GetString("host", "127.0.0.1");
  const std::string policy_name = flags.GetString("policy", "none");
  const std::string policy_config_path = flags.GetString("policy-config");
  const std::string latency_path = flags.GetString("latency-model");
  const std::string pipeline = flags.GetString("pipeline", "on");
  const absl::StatusOr<bool> step_sockets_flag = flags.GetOnOff("step-sockets", true);
  if (!step_sockets_flag.ok()) return Fail(step_sockets_flag.status());
  const absl::StatusOr<absl::Duration> step_spin_flag = rpc::ParseStepSpin(flags);
  if (!step_spin_flag.ok()) return Fail(step_spin_flag.status());
  const absl::Duration step_spin = *step_spin_flag;
  const absl::StatusOr<bool> step_memory_flag = flags.GetOnOff("step-memory", true);
  if (!step_memory_flag.ok()) return Fail(step_memory_flag.status());
  const bool step_memory = *step_memory_flag;
  const std::string latency_residual = flags.GetString("latency-residual", "on");
  std::string tokenizer_path = flags.GetString("tokenizer");
  auto port = flags.GetIntInRange("port", 50050, 0, 65535);
  auto max_queue = flags.GetIntInRange("max-queue", 256, 1, INT_MAX);
  auto max_running = flags.GetIntInRange("max-running", 64, 1, INT_MAX);
  auto max_k = flags.GetIntInRange("max-k", 8, 0, 1024);
  auto default_max_tokens = flags.GetIntInRange("default-max-tokens", 128, 1, INT_MAX);
  auto worker_timeout = flags.GetDouble("worker-timeout-seconds", 60);
  auto wait = flags.GetDoubleAtLeast("wait-seconds", 60, 0);
  auto drain = flags.GetDoubleAtLeast("drain-seconds", 30, 0);
  auto failover_wait = flags.GetDoubleAtLeast("failover-wait-seconds", 10, 0);
  auto deadline_factor = flags.GetDouble("deadline-factor", 8);
  auto deadline_floor = flags.GetDouble("deadline-floor-seconds", 0.5);
  auto probe_interval = flags.GetDouble("probe-interval-seconds", 0.25);
  auto resolve_interval = flags.GetDouble("resolve-interval-seconds", 10);
  auto metrics_port = flags.GetInt("metrics-port", metrics::kRouterMetricsPort);
  const std::string metrics_host = flags.GetString("metrics-host", splitspec::rpc::IsUnixSocket(host) ? "127.0.0.1" : host);
  auto http_port = flags.GetInt("http-port", -1);
  const std::string http_host = flags.GetString("http-host", splitspec::rpc::IsUnixSocket(host) ? "127.0.0.1" : host);
  std::string api_key = flags.GetString("api-key");
  const std::string api_key_file = flags.GetString("api-key-file");
  rpc::TlsFiles worker_tls;
  worker_tls.cert = flags.GetString("worker-tls-cert");
  worker_tls.key = flags.GetString("worker-tls-key");
  worker_tls.ca = flags.GetString("worker-tls-ca");
  auto serving = rpc::ParseWorkerServing(flags);
  if (!serving.ok()) return Fail(serving.status());
  worker_tls.reload_seconds = serving->tls.reload_seconds;
  const std::string chat_template_path = flags.GetString("chat-template");
  // Each thread is started when the HTTP server starts: a typo of 10^6 threads must not be a crash.
  auto http_threads = flags.GetIntInRange("http-threads", 64, 1, kMaxHttpThreads);
  // Greedy: four, one for every position of a static:3 hypothesis, measured faster than two on
  // the bundled pair at one client and no slower at four (docs/benchmarks.md, "Four
  // alternatives for greedy requests"). Sampled: two, as fast as four, with a lower step
  // overhead p99 (each sampled alternative carries its draft distributions).
  auto alternatives = flags.GetIntInRange("draft-ahead-alternatives", 4, 0, kMaxDraftAheadAlternatives);
  auto sampled_alternatives =
      flags.GetIntInRange("draft-ahead-sampled-alternatives", 2, 0, kMaxDraftAheadAlternatives);
  for (const absl::Status& s : {port.status(), max_queue.status(), max_running.status(), max_k.status(),
                                alternatives.status(), sampled_alternatives.status(), default_max_tokens.status(),
                                worker_timeout.status(), wait.status(), drain.status(), failover_wait.status(),
                                deadline_factor.status(), deadline_floor.status(), probe_interval.status(),
                                resolve_interval.status(),
                                metrics_port.status(), http_port.status(), http_threads.status(),
                                flags.CheckAllUsed()}) {
    if (!s.ok()) return Fail(s);
  }
  // Before any worker is reached, a value that cannot serve is an error now, not a hang later
  // (--max-running 0 admitted nothing, so every request waited forever): the getters above check
  // the integer and at-least ranges, these the strictly positive durations and factors.
  const std::vector<std::pair<const char*, bool>> ranges = {
      {"--worker-timeout-seconds must be > 0", *worker_timeout > 0},
      {"--deadline-factor must be > 0", *deadline_factor > 0},
      {"--deadline-floor-seconds must be > 0", *deadline_floor > 0},
      {"--probe-interval-seconds must be > 0", *probe_interval > 0},
      {"--resolve-interval-seconds must be > 0", *resolve_interval > 0},
  };
  for (const auto& [message, ok] : ranges) {
    if (!ok) return Fail(absl::InvalidArgumentError(message));
  }

  if (verifier_address.empty()) return Fail(absl::InvalidArgumentError("--verifier ADDR is required"));
  if (*metrics_port < -1 || *metrics_port > 65535) {
    return Fail(absl::InvalidArgumentError("--metrics-port must be a port, 0 (any free one) or -1 (off)"));
  }

  if (*http_port < -1 || *http_port > 65535) {
    return Fail(absl::InvalidArgumentError("--http-port must be a port, 0 (any free one) or -1 (off)"));
  }
  if (!api_key.empty() && !api_key_file.empty()) {
    return Fail(absl::InvalidArgumentError("give --api-key or --api-key-file, not both"));
  }
  if (!api_key_file.empty()) {
    auto key = router::http::ReadApiKeyFile(api_key_file);
    if (!key.ok()) return Die("--api-key-file", key.status());
    api_key = *key;
  }

  // A step socket carries no TLS: with worker certificates every call stays on gRPC.
  const bool step_sockets = *step_sockets_flag && !worker_tls.enabled();
  // Every channel to a worker made from here on presents our certificate (mutual TLS).
  if (absl::Status s = rpc::UseClientTls(worker_tls); !s.ok()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--worker-tls-cert/--worker-tls-key/--worker-tls-ca: ", s.message())));
  }

  // The metrics registry outlives the worker clients, which record their step socket answers in
  // it from the first call.
  metrics::MetricsRegistry registry;
  auto pickup_metrics = metrics::StepPickupMetrics::Create(registry, metrics::StepPickupMetrics::Frames::kAnswers);
  if (!pickup_metrics.ok()) return Die("metrics", pickup_metrics.status());
  const rpc::PickupObserver on_pickup = (*pickup_metrics)->Observer();

  // Workers. One verifier replica must be up (its KV size drives admission); the other
  // replicas and the drafters may come later.
  // dns:/// names resolve to one replica per address, re-resolved while serving.
  auto discovery = router::VerifierDiscovery::Create(
      verifier_address,
      [timeout = absl::Seconds(*worker_timeout), step_sockets, step_spin, step_memory, on_pickup](
          const std::string& address, const std::string& server_name) {
        return std::make_unique<router::GrpcVerifier>(address, timeout, server_name, step_sockets, step_spin,
                                                      step_memory, on_pickup);
      },
      rpc::ResolveAddresses);
  if (!discovery.ok()) return Die("--verifier " + verifier_address, discovery.status());
  const std::vector<router::VerifierClient*> verifier_clients = (*discovery)->initial();
  std::vector<router::GrpcVerifier*> verifiers;
  for (router::VerifierClient* client : verifier_clients) verifiers.push_back(static_cast<router::GrpcVerifier*>(client));
  size_t first_up = 0;
  // Over each replica's own channel: it carries the name its certificate must have.
  while (first_up < verifiers.size() && !rpc::CheckHealth(verifiers[first_up]->channel()).ok()) {
    ++first_up;
  }
  if (first_up == verifiers.size()) {
    first_up = 0;
    if (absl::Status s = rpc::WaitForHealthy(verifiers[0]->channel(), absl::Seconds(*wait)); !s.ok()) {
      return Die("verifier " + verifiers[0]->address(), s);
    }
  }
  router::GrpcVerifier& verifier = *verifiers[first_up];
  router::SteadyClock drafter_clock;
  auto drafter_discovery = router::DrafterDiscovery::Create(
      drafter_flags,
      [timeout = absl::Seconds(*worker_timeout), step_sockets, step_spin, step_memory, on_pickup](
          const std::string& address, const std::string& server_name) {
        return std::make_unique<router::GrpcDrafter>(address, timeout, server_name, step_sockets, step_spin,
                                                     step_memory, on_pickup);
      },
      rpc::ResolveAddresses, &drafter_clock, *probe_interval);
  if (!drafter_discovery.ok()) return Fail(drafter_discovery.status());
  const router::DrafterPools& pools = (*drafter_discovery)->pools();

  // Tokenizer: text prompts, text deltas, stop strings and the EOS id.
  std::unique_ptr<engine::Tokenizer> tokenizer;
  std::string model_dir;  // where tokenizer_config.json (chat template, bos/eos) is looked for
  if (tokenizer_path.empty()) {
    auto dir = verifier.ModelDir();
    if (!dir.ok()) return Die("asking the verifier for its model dir", dir.status());
    if (dir->empty()) {
      return Fail(absl::FailedPreconditionError(
          "the verifier does not reveal its model directory: pass --tokenizer PATH|none (or start the verifier "
          "with --expose-model-path)"));
    }
    model_dir = *dir;
    tokenizer_path = engine::TokenizerPathInModelDir(model_dir);
  } else if (tokenizer_path != "none") {
    model_dir = std::filesystem::is_directory(tokenizer_path)
                    ? tokenizer_path
                    : std::filesystem::path(tokenizer_path).parent_path().string();
  }
  if (tokenizer_path != "none") {
    auto loaded = engine::LoadTokenizer(tokenizer_path);
    if (!loaded.ok()) return Die("loading tokenizer " + tokenizer_path + " (use --tokenizer)", loaded.status());
    tokenizer = std::move(*loaded);
  }

  // Chat template for /v1/chat/completions: optional unless --chat-template names one.
  std::optional<chat_template::ChatTemplate> chat_template;
  if (*http_port >= 0) {
    if (tokenizer == nullptr) return Fail(absl::InvalidArgumentError("--http-port needs a tokenizer"));
    auto loaded = chat_template::ChatTemplate::ForModelDir(model_dir, chat_template_path);
    if (loaded.ok()) {
      chat_template = *std::move(loaded);
    } else if (!chat_template_path.empty() || loaded.status().code() != absl::StatusCode::kNotFound) {
      return Die("chat template", loaded.status());
    } else {
      std::fprintf(stderr, "splitspec-router: %s; /v1/chat/completions is off (use --chat-template)\n",
                   std::string(loaded.status().message()).c_str());
    }
  }

  nlohmann::json policy_config = nlohmann::json::object();
  if (!policy_config_path.empty()) {
    auto loaded = router::LoadJsonFile(policy_config_path);
    if (!loaded.ok()) return Die("policy config", loaded.status());
    policy_config = *loaded;
  }
  auto policy = router::MakePolicy(policy_name, policy_config);
  if (!policy.ok()) return Fail(policy.status());
  auto acceptance = router::ParseAcceptanceConfig(policy_config);
  if (!acceptance.ok()) return Die("policy config", acceptance.status());
  router::LatencyModel latency;
  if (!latency_path.empty()) {
    auto loaded = router::LatencyModel::Load(latency_path);
    if (!loaded.ok()) return Die("latency model", loaded.status());
    latency = *loaded;
  }

  router::RouterOptions options;
  options.max_queue = *max_queue;
  options.max_running = *max_running;
  options.max_k = *max_k;
  // /server_info and the metrics read the policy state and estimates from a snapshot; building
  // it is JSON and string work (34 us a step with `none`, 96 us with smartspec, measured on a
  // 2-core EPYC: 1.3% of a 7 ms step), so it is refreshed every 32 steps and whenever the batch
  // empties rather than after every step. Counters and the step overheads stay per step.
  options.snapshot_every_steps = 32;
  options.defer_token_events = true;
  options.defer_step_reports = true;
  if (pipeline != "on" && pipeline != "off") {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--pipeline must be on or off, not '", pipeline, "'")));
  }
  options.pipeline = pipeline == "on";
  options.draft_ahead_alternatives = static_cast<int32_t>(*alternatives);
  options.draft_ahead_sampled_alternatives = static_cast<int32_t>(*sampled_alternatives);
  options.slowdown_probe_steps = router::kDefaultSlowdownProbeSteps;
  if (latency_residual != "on" && latency_residual != "off") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--latency-residual must be on or off, not '", latency_residual, "'")));
  }
  options.latency_residual = latency_residual == "on";
  options.acceptance = *acceptance;
  options.failover_wait_seconds = *failover_wait;
  options.deadline_factor = *deadline_factor;
  options.deadline_floor_seconds = *deadline_floor;
  options.deadline_ceiling_seconds = *worker_timeout;
  options.probe_interval_seconds = *probe_interval;
  if (tokenizer != nullptr) {
    options.eos_token_id = tokenizer->eos_id();
    const engine::Tokenizer* tok = tokenizer.get();
    options.detokenize = [tok](absl::Span<const int32_t> ids) {
      return tok->Decode(std::vector<int32_t>(ids.begin(), ids.end()));
    };
  }
  router::SteadyClock clock;
  // Metrics before the core: the core's hooks call into them until the loop has drained.
  router::RouterMetricsOptions metrics_options;
  for (const auto& [name, client] : pools) metrics_options.pools.push_back(name);
  metrics_options.policy = policy_name;
  metrics_options.max_k = *max_k;
  auto router_metrics = router::RouterMetrics::Create(registry, metrics_options, &clock);
  if (!router_metrics.ok()) return Die("metrics", router_metrics.status());
  (*router_metrics)->Install(&options);

  router::RouterCore core(options, verifier_clients, pools, std::move(*policy), latency, &clock);
  // dns:/// names are resolved again off the step thread. Destroyed before the core and the
  // discoveries (declared after them): its thread calls into all three.
  std::unique_ptr<rpc::PeriodicTask> rediscovery;
  if ((*discovery)->has_names() || (*drafter_discovery)->has_names()) {
    rediscovery = std::make_unique<rpc::PeriodicTask>(
        std::chrono::milliseconds(static_cast<int64_t>(*resolve_interval * 1000)),
        [verifiers = discovery->get(), drafters = drafter_discovery->get(), &core] {
          verifiers->Refresh(&core);
          drafters->Refresh();
        });
  }
  if (absl::Status s = core.Init(); !s.ok()) return Die("router init", s);
  (*router_metrics)->SetCore(&core);
  auto verifier_info = verifier.Info();
  if (!verifier_info.ok()) return Die("verifier info", verifier_info.status());

  std::unique_ptr<metrics::MetricsHttpServer> metrics_server;
  if (*metrics_port >= 0) {
    metrics::MetricsHttpServerOptions http;
    http.host = metrics_host;
    http.port = *metrics_port;
    metrics_server = std::make_unique<metrics::MetricsHttpServer>(registry, http);
    const router::RouterMetrics* rm = router_metrics->get();
    const std::string model_name = verifier_info->model_name;
    absl::Status s = metrics_server->AddJsonEndpoint("/server_info", [rm, &core, model_name] {
      nlohmann::json info = rm->ServerInfoJson(core.Snapshot());
      info["model_name"] = model_name;
      return absl::StatusOr<nlohmann::json>(std::move(info));
    });
    if (s.ok()) s = metrics_server->Start();
    if (!s.ok()) return Die("--metrics-port", s);
  }

  router::RouterServiceOptions service_options;
  service_options.default_max_tokens = *default_max_tokens;
  service_options.model_name = verifier_info->model_name;
  service_options.vocab_size = verifier_info->vocab_size;
  service_options.metrics = router_metrics->get();
  service_options.api_key = api_key;
  router::RouterService service(&core, tokenizer.get(), service_options);
  router::RouterLoop loop(&core, router_metrics->get());
  loop.Start();

  rpc::ServerOptions server_options;
  server_options.address = rpc::JoinHostPort(host, *port);
  // Running requests were already drained by the loop; this only bounds stragglers.
  server_options.drain_timeout = absl::Seconds(2);
  serving->ApplyTo(&server_options);
  auto server = rpc::Server::Start(server_options, {&service}, {"splitspec.v1.Router"});
  if (!server.ok()) {
    loop.Drain(absl::ZeroDuration());
    return Die("starting the server", server.status());
  }
  std::printf("splitspec-router listening on %s (policy %s, %zu drafter pool(s), %s%s)\n",
              (*server)->address().c_str(), policy_name.c_str(), pools.size(), serving->Describe().c_str(),
              worker_tls.enabled() ? ", workers over mutual TLS" : ", workers in plaintext");
  if (metrics_server != nullptr) {
    std::printf("splitspec-router metrics on %s\n", rpc::JoinHostPort(metrics_host, metrics_server->port()).c_str());
  }
  if ((*server)->health_port() >= 0) std::printf("splitspec-router health on port %d\n", (*server)->health_port());

  std::unique_ptr<router::http::OpenAiHttpServer> http_server;
  if (*http_port >= 0) {
    router::http::OpenAiServerOptions http;
    http.host = http_host;
    http.port = *http_port;
    http.n_threads = *http_threads;
    http.api_key = api_key;
    http.limits.model_name = verifier_info->model_name;
    http.limits.default_max_tokens = *default_max_tokens;
    http_server = std::make_unique<router::http::OpenAiHttpServer>(
        &core, tokenizer.get(), chat_template ? &*chat_template : nullptr, router_metrics->get(), http);
    if (absl::Status s = http_server->Start(); !s.ok()) {
      loop.Drain(absl::ZeroDuration());
      return Die("--http-port", s);
    }
    std::printf("splitspec-router OpenAI API on %s\n", rpc::JoinHostPort(http_host, http_server->port()).c_str());
  }
  std::fflush(stdout);
  const int signal_number = rpc::WaitForTerminationSignal();
  std::fprintf(stderr, "splitspec-router: signal %d, draining\n", signal_number);
  loop.Drain(absl::Seconds(*drain));
  (*server)->Shutdown();
  if (http_server != nullptr) http_server->Stop();
  if (metrics_server != nullptr) metrics_server->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (splitspec::rpc::HelpRequested(argc, argv)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  // Before any thread exists, so every gRPC thread inherits the blocked mask.
  splitspec::rpc::BlockTerminationSignals();
  // Abseil's lock-order graph (on unless the library was built with NDEBUG) costs every
  // Mutex::Lock a lookup; the tests, TSan builds included, check lock order instead.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto flags = splitspec::rpc::Flags::Parse(argc, argv, splitspec::rpc::WorkerServingBooleanFlags());
  if (!flags.ok()) return Fail(flags.status());
  return Run(*flags);
}
