// splitspec-verifier: serves the Verifier gRPC service over the target model.
//   splitspec-verifier --model DIR --port P [--device cpu|cuda|cuda:N]
// Other flags: --host (127.0.0.1), --max-draft-tokens (64), --kv-blocks (1024), --block-size
// (16), --max-context (0 = the model's max_position_embeddings), --session-lease-seconds
// (300; idle sessions are reclaimed after it, <= 0 = never), --max-sessions (4096), --threads (per rank; 0 = all cores, split between ranks as threads), --drain-seconds
// (10), --metrics-port (9402; 0 = a free port, -1 = no metrics server), --metrics-host (--host).
// Prints "splitspec-verifier listening on HOST:PORT" once serving (--port 0 picks a free port),
// then "splitspec-verifier metrics on HOST:PORT" (GET /metrics);
// SIGTERM/SIGINT drain in-flight calls and exit 0.
//
// Tensor parallelism (verifier/tp_step.h):
//   --tp N                      N ranks as threads of this process (in-process communicator;
//                               --device cpu).
//   --tp N --tp-rank R          one process per GPU over NCCL (--device cuda: rank R uses GPU R;
//                               cuda:K pins GPU K). Rank 0 serves gRPC; ranks 1..N-1 follow its
//                               steps and exit when it does. The NCCL group id travels either
//     --tp-leader-port P        over the network (verifier/tp_membership.h): rank 0 listens on
//     --tp-leader HOST:P        --host:P, ranks 1..N-1 connect (retrying up to --tp-join-seconds)
//                               and the connections stay open: a rank whose peer is lost (closed,
//                               or silent for --tp-heartbeat-seconds) exits 1 so the group is
//                               restarted, instead of blocking in NCCL; or
//     --tp-id-file F            through a file: rank 0 writes it, ranks 1..N-1 read it at start.
// --check-flags validates the flags (device names but not devices) and exits 0 without loading.
// Errors in the flags, and devices this build or machine lacks (--device cuda without CUDA or
// without a GPU), exit 2 with the reason; failures to load the model exit 1.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
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
#include "verifier/tp_membership.h"
#include "verifier/tp_step.h"
#include "verifier/verifier_core.h"
#include "verifier/verifier_replica.h"
#include "verifier/verifier_service.h"

#ifdef SPLITSPEC_HAVE_NCCL
#include "common/engine/comm/nccl_communicator.h"
#endif

namespace {

constexpr char kUsage[] =
    "usage: splitspec-verifier --model DIR [--device cpu|cuda|cuda:N] [flags]\n"
    "\n"
    "Serves the Verifier gRPC service over the target model.\n"
    "\n"
    "  --model DIR              target model directory (config.json, *.safetensors, tokenizer.model)\n"
    "  --device cpu|cuda|cuda:N where the model runs (cpu)\n"
    "  --quantize none|int8     int8: quantize the weight matrices at load (Q8_0) (none)\n"
    "  --host H                 address to listen on (127.0.0.1); unix:///PATH = a Unix socket\n"
    "  --port P                 gRPC port (50051; 0 = a free port)\n"
    "  --max-draft-tokens K     largest draft tree per request and step (64)\n"
    "  --kv-blocks N            KV-cache blocks (1024)\n"
    "  --block-size N           tokens per KV-cache block (16)\n"
    "  --kv-dtype f32|f16       how the KV cache stores K and V: f16 halves its memory and reads (CPU only) (f32)\n"
    "  --threads N              CPU threads per rank (0 = all cores, split between ranks)\n"
    "  --tp N                   tensor-parallel ranks: threads of this process on the CPU (1)\n"
    "  --tp-rank R              with --device cuda: this process is rank R of --tp N over NCCL;\n"
    "                           the ranks share the NCCL group id over the network or by a file:\n"
    "  --tp-leader-port P       rank 0 listens on --host:P and hands the id to ranks 1..N-1\n"
    "  --tp-leader HOST:P       ranks 1..N-1: rank 0's address; they keep the connection, and any\n"
    "                           rank whose peer is lost exits 1 (the group must restart)\n"
    "  --tp-join-seconds S      how long ranks wait for each other to join (300)\n"
    "  --tp-heartbeat-seconds S a peer silent this long is lost (15)\n"
    "  --tp-id-file F           instead: rank 0 writes the id to F; ranks 1..N-1 read it (start\n"
    "                           them once F exists)\n"
    "  --drain-seconds S        on SIGTERM/SIGINT, how long in-flight calls may finish (10)\n"
    "  --max-context TOKENS     longest sequence served (0 = the model's max_position_embeddings)\n"
    "  --session-lease-seconds S  idle sessions are reclaimed after S seconds (300; <= 0 = never)\n"
    "  --max-sessions N         sessions held at once; more answer RESOURCE_EXHAUSTED (4096)\n"
    "  --metrics-port P|0|-1    GET /metrics port (9402; 0 = a free port, -1 = off)\n"
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
    "  --step-socket on|off     with a unix:// --host and no TLS, also serve Verify on PATH.step, a\n"
    "                           plain socket with no thread hand-offs for a router on this host (on)\n"
    "  --step-port P|0          with a TCP --host and no TLS, also serve Verify on a step socket at\n"
    "                           this TCP port (0 = a free one), which GetInfo reports to routers;\n"
    "                           plaintext, like the gRPC port without TLS (off by default)\n"
    "  --step-spin-us US        on the step socket, poll for the next request from US before to US\n"
    "                           after it is due (from the last gaps; up to 8x wider where they\n"
    "                           wandered), sleeping otherwise (300; 0 = always sleep)\n"
    "  --expose-model-path      GetInfo reports the model directory (off: only its name), which a\n"
    "                           router uses to find the tokenizer when it has no --tokenizer\n"
    "  --check-flags            check the flags (device names, not devices) and exit 0 without\n"
    "                           loading the model\n"
    "  --help                   print this help and exit\n"
    "\n"
    "Prints \"splitspec-verifier listening on HOST:PORT\" once serving. Flag errors and devices this\n"
    "build or machine lacks exit 2; a model that does not load exits 1.\n";

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "error: %s\n%s", std::string(status.message()).c_str(), kUsage);
  return 2;
}

int FlagsOk() {
  std::printf("splitspec-verifier: flags ok\n");
  return 0;
}

int LoadFailed(const std::string& model_dir, const absl::Status& status) {
  std::fprintf(stderr, "error: loading target model %s: %s\n", model_dir.c_str(), std::string(status.message()).c_str());
  return 1;
}


// Serves `core` until SIGTERM/SIGINT.
int Serve(splitspec::verifier::VerifierCore& core, const std::string& host, int port, int metrics_port,
          const std::string& metrics_host, double drain, const std::string& device,
          const splitspec::rpc::WorkerServing& serving, bool expose_model_path) {
  splitspec::metrics::MetricsRegistry registry;
  auto worker_metrics = splitspec::metrics::WorkerMetrics::Create(registry, splitspec::metrics::WorkerRole::kVerifier);
  if (!worker_metrics.ok()) return Fail(worker_metrics.status());
  auto pickup_metrics =
      splitspec::metrics::StepPickupMetrics::Create(registry, splitspec::metrics::StepPickupMetrics::Frames::kRequests);
  if (!pickup_metrics.ok()) return Fail(pickup_metrics.status());
  splitspec::verifier::VerifierService service(&core, worker_metrics->get(), expose_model_path);
  auto metrics_server = splitspec::metrics::StartMetricsServer(registry, metrics_host, metrics_port);
  if (!metrics_server.ok()) {
    std::fprintf(stderr, "error: %s (--metrics-port)\n", std::string(metrics_server.status().message()).c_str());
    return 1;
  }

  splitspec::rpc::ServerOptions server_options;
  server_options.address = splitspec::rpc::JoinHostPort(host, port);
  server_options.drain_timeout = absl::Seconds(drain);
  serving.ApplyTo(&server_options);
  server_options.step_handler = service.StepHandler();
  server_options.on_step_port = [&service](int port, uint64_t token) { service.set_step_port(port, token); };
  server_options.step_pickup_observer = (*pickup_metrics)->Observer();
  auto server = splitspec::rpc::Server::Start(server_options, {&service}, {"splitspec.v1.Verifier"});
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("splitspec-verifier listening on %s (%s, %s, tp %d, %s)\n", (*server)->address().c_str(),
              core.Info().model_name.c_str(), device.c_str(), core.tp_size(), serving.Describe().c_str());
  if (*metrics_server != nullptr) {
    std::printf("splitspec-verifier metrics on %s\n",
                splitspec::rpc::JoinHostPort(metrics_host, (*metrics_server)->port()).c_str());
  }
  if ((*server)->health_port() >= 0) std::printf("splitspec-verifier health on port %d\n", (*server)->health_port());
  if (!(*server)->step_socket_path().empty()) {
    std::printf("splitspec-verifier step socket %s\n", (*server)->step_socket_path().c_str());
  }
  if ((*server)->step_port() != 0) std::printf("splitspec-verifier step socket on port %d\n", (*server)->step_port());
  std::fflush(stdout);
  const int signal_number = splitspec::rpc::WaitForTerminationSignal();
  std::fprintf(stderr, "splitspec-verifier: signal %d, draining\n", signal_number);
  (*server)->Shutdown();
  if (*metrics_server != nullptr) (*metrics_server)->Stop();
  return 0;
}

#ifdef SPLITSPEC_HAVE_NCCL
int GroupFailed(const absl::Status& status) {
  std::fprintf(stderr, "error: joining the tensor-parallel group: %s\n", std::string(status.message()).c_str());
  return 1;
}

// A peer of this rank is gone: the group cannot go on (a collective would wait forever), so the
// process exits at once, from the rendezvous thread, for the orchestrator to restart the group.
void ExitOnLostPeer(const absl::Status& why) {
  std::fprintf(stderr, "error: %s; exiting so that the tensor-parallel group restarts\n",
               std::string(why.message()).c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// One process of a multi-process group (NCCL). Rank 0 serves; the others follow until rank 0
// shuts the group down.
int RunRankProcess(const splitspec::verifier::VerifierOptions& options,
                   const splitspec::verifier::TpMembershipOptions& group, const std::string& host, int port,
                   int metrics_port, const std::string& metrics_host, double drain,
                   const splitspec::rpc::WorkerServing& serving, bool expose_model_path) {
  namespace engine = splitspec::engine;
  const int tp_rank = group.rank;
  auto membership = splitspec::verifier::TpMembership::Join(
      group, [] { return engine::NewNcclUniqueId(); }, ExitOnLostPeer, [](const std::string& line) {
        std::fprintf(stderr, "splitspec-verifier: %s\n", line.c_str());
      });
  if (!membership.ok()) return GroupFailed(membership.status());
  const std::string& id = (*membership)->group_id();
  const engine::DeviceSpec device = *engine::ParseDevice(options.device);
  if (absl::Status s = engine::BindCallingThread(device, 0); !s.ok()) return GroupFailed(s);
  auto backend = engine::CreateBackendByName(options.device);
  if (!backend.ok()) return GroupFailed(backend.status());
  // Blocks until every rank has joined.
  auto comm = engine::CreateNcclCommunicator(id, tp_rank, options.tp_size, device.index,
                                             engine::BackendStream(**backend));
  if (!comm.ok()) return GroupFailed(comm.status());
  splitspec::verifier::ReplicaOptions replica_options;
  replica_options.model_dir = options.model_dir;
  replica_options.device = options.device;
  replica_options.n_threads = options.n_threads;
  replica_options.kv_blocks = options.kv_blocks;
  replica_options.block_size = options.block_size;
  replica_options.kv_dtype = options.kv_dtype;
  replica_options.tp_rank = tp_rank;
  replica_options.tp_size = options.tp_size;
  auto replica = splitspec::verifier::VerifierReplica::Create(replica_options, std::move(*backend), comm->get());
  if (!replica.ok()) return LoadFailed(options.model_dir, replica.status());
  if (tp_rank != 0) {
    std::printf("splitspec-verifier rank %d of %d following rank 0 (%s)\n", tp_rank, options.tp_size,
                options.device.c_str());
    std::fflush(stdout);
    splitspec::verifier::StepChannel channel((*replica)->backend(), **comm);
    const absl::Status followed = splitspec::verifier::RunFollower(**replica, channel);
    if (!followed.ok()) {
      std::fprintf(stderr, "error: rank %d cannot follow rank 0: %s\n", tp_rank, std::string(followed.message()).c_str());
      return 1;
    }
    (*membership)->Finish();
    return 0;
  }
  auto core = splitspec::verifier::VerifierCore::CreateRank0(options, std::move(*comm), std::move(*replica));
  if (!core.ok()) return LoadFailed(options.model_dir, core.status());
  const int served =
      Serve(**core, host, port, metrics_port, metrics_host, drain, options.device, serving, expose_model_path);
  core->reset();  // sends the followers their shutdown
  (*membership)->Finish();
  return served;
}
#endif  // SPLITSPEC_HAVE_NCCL

int Run(const splitspec::rpc::Flags& flags) {
  splitspec::verifier::VerifierOptions options;
  options.model_dir = flags.GetString("model");
  options.device = flags.GetString("device", "cpu");
  const std::string quantize = flags.GetString("quantize", "none");
  const std::string kv_dtype = flags.GetString("kv-dtype", "f32");
  auto port = flags.GetIntInRange("port", 50051, 0, 65535);
  auto max_draft = flags.GetIntInRange("max-draft-tokens", 64, 0, splitspec::rpc::kMaxDraftTokensFlag);
  auto kv_blocks = flags.GetIntInRange("kv-blocks", 1024, 1, INT_MAX);
  auto block_size = flags.GetIntInRange("block-size", 16, 1, splitspec::rpc::kMaxKvBlockSize);
  auto max_context = flags.GetIntInRange("max-context", 0, 0, INT_MAX);
  auto lease = flags.GetDouble("session-lease-seconds", 300);
  auto max_sessions = flags.GetIntInRange("max-sessions", 4096, 1, INT_MAX);
  auto threads = flags.GetIntInRange("threads", 0, 0, splitspec::rpc::kMaxWorkerThreads);
  auto tp = flags.GetIntInRange("tp", 1, 1, splitspec::rpc::kMaxInProcessTpRanks);
  const bool multi_process = flags.Has("tp-rank");
  auto tp_rank = flags.GetInt("tp-rank", 0);
  const std::string tp_id_file = flags.GetString("tp-id-file");
  const bool tp_network = flags.Has("tp-leader-port") || flags.Has("tp-leader");
  auto tp_leader_port = flags.GetInt("tp-leader-port", -1);
  const std::string tp_leader = flags.GetString("tp-leader");
  auto tp_join_seconds = flags.GetDouble("tp-join-seconds", 300);
  auto tp_heartbeat_seconds = flags.GetDouble("tp-heartbeat-seconds", 15);
  const bool check_only = flags.Has("check-flags");
  auto drain = flags.GetDoubleAtLeast("drain-seconds", 10, 0);
  const std::string host = flags.GetString("host", "127.0.0.1");
  auto metrics_port = flags.GetInt("metrics-port", splitspec::metrics::kVerifierMetricsPort);
  const std::string metrics_host = flags.GetString("metrics-host", splitspec::rpc::IsUnixSocket(host) ? "127.0.0.1" : host);
  auto serving = splitspec::rpc::ParseWorkerServing(flags);
  const absl::StatusOr<bool> step_socket = flags.GetOnOff("step-socket", true);
  const bool expose_model_path = flags.Has("expose-model-path");
  for (const absl::Status& s : {serving.status(), step_socket.status(), port.status(), max_draft.status(), kv_blocks.status(), block_size.status(),
                                max_context.status(), lease.status(), max_sessions.status(), threads.status(), tp.status(), tp_rank.status(), tp_leader_port.status(),
                                tp_join_seconds.status(), tp_heartbeat_seconds.status(), drain.status(),
                                metrics_port.status(), flags.CheckAllUsed()}) {
    if (!s.ok()) return Fail(s);
  }
  serving->step_socket = *step_socket;
  if (options.model_dir.empty()) return Fail(absl::InvalidArgumentError("--model DIR is required"));
  // --check-flags: the device's name, not whether this machine has it.
  absl::Status device_ok = check_only ? splitspec::engine::ParseDevice(options.device).status()
                                      : splitspec::engine::CheckDevice(options.device);
  if (!device_ok.ok()) return Fail(device_ok);
  const splitspec::engine::DeviceSpec device = *splitspec::engine::ParseDevice(options.device);
  auto quantization = splitspec::engine::ParseWeightQuantization(quantize);
  if (!quantization.ok()) return Fail(quantization.status());
  options.quantize = *quantization;
  auto kv_element = splitspec::engine::ParseKvDType(kv_dtype);
  if (!kv_element.ok()) return Fail(kv_element.status());
  options.kv_dtype = *kv_element;
  options.kv_blocks = *kv_blocks;
  options.block_size = *block_size;
  options.max_draft_tokens = *max_draft;
  options.max_context_tokens = *max_context;
  options.session_lease_seconds = *lease;
  options.max_sessions = *max_sessions;
  options.n_threads = *threads;
  options.tp_size = *tp;

  if (multi_process) {
    if (*tp_rank < 0 || *tp_rank >= *tp) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--tp-rank ", *tp_rank, " outside [0, ", *tp, ")")));
    }
    splitspec::verifier::TpMembershipOptions group;
    group.group_size = *tp;
    group.rank = *tp_rank;
    group.id_file = tp_id_file;
    group.listen_host = host;
    group.leader_port = *tp_leader_port;
    group.leader = tp_leader;
    group.join_timeout = absl::Seconds(*tp_join_seconds);
    group.heartbeat_timeout = absl::Seconds(*tp_heartbeat_seconds);
    if (absl::Status s = splitspec::verifier::CheckTpMembershipOptions(group); !s.ok()) return Fail(s);
    if (splitspec::rpc::IsUnixSocket(host) && *tp_rank == 0 && tp_id_file.empty()) {
      return Fail(absl::InvalidArgumentError("--tp-leader-port listens on --host, which must be a TCP address"));
    }
    if (!device.cuda) {
      return Fail(absl::InvalidArgumentError(
          "one process per rank runs NCCL between GPUs: use --device cuda; on the CPU run every rank in one "
          "process with --tp N and no --tp-rank"));
    }
    if (check_only) return FlagsOk();
#ifdef SPLITSPEC_HAVE_NCCL
    // `cuda` means one GPU per rank, by rank; `cuda:K` pins the device.
    if (options.device == "cuda") {
      options.device = absl::StrCat("cuda:", *tp_rank);
      if (absl::Status s = splitspec::engine::CheckDevice(options.device); !s.ok()) return Fail(s);
    }
    return RunRankProcess(options, group, host, *port, *metrics_port, metrics_host, *drain, *serving,
                          expose_model_path);
#else
    return Fail(absl::UnimplementedError("--tp-rank (one process per GPU) needs NCCL; this build has none"));
#endif
  }
  if (!tp_id_file.empty()) return Fail(absl::InvalidArgumentError("--tp-id-file goes with --tp-rank"));
  if (tp_network) return Fail(absl::InvalidArgumentError("--tp-leader and --tp-leader-port go with --tp-rank"));
  if (*tp > 1 && device.cuda) {
    return Fail(absl::InvalidArgumentError(
        "--tp N without --tp-rank runs the ranks as threads of one process on the CPU; on GPUs run one "
        "process per rank with --tp-rank R (and --tp-leader-port / --tp-leader, or --tp-id-file)"));
  }
  if (check_only) return FlagsOk();
  auto core = splitspec::verifier::VerifierCore::Create(options);
  if (!core.ok()) return LoadFailed(options.model_dir, core.status());
  return Serve(**core, host, *port, *metrics_port, metrics_host, *drain, options.device, *serving,
               expose_model_path);
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
  boolean_flags.insert("expose-model-path");
  boolean_flags.insert("check-flags");
  auto flags = splitspec::rpc::Flags::Parse(argc, argv, boolean_flags);
  if (!flags.ok()) return Fail(flags.status());
  return Run(*flags);
}
