// `splitspec bench`: a serving load generator for a running router. For each load level
// (Poisson request rate, or closed-loop client count) it streams Generate calls built from a
// JSONL workload and reports throughput, TTFT / TPOT / ITL / E2E and the accept length; writes
// CSV and JSON with --out-prefix. Every level ends by itself (sending window + drain deadline)
// and only loopback routers are accepted. The policy sweep is scripts/bench-sweep.sh.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/rpc/worker_clients.h"
#include "tools/bench_arrivals.h"
#include "tools/bench_client.h"
#include "tools/bench_report.h"
#include "tools/bench_runner.h"
#include "tools/bench_stats.h"
#include "tools/bench_workload.h"
#include "tools/command.h"

namespace splitspec::tools {
namespace {

constexpr int kMaxConcurrency = 1024;

int UsageError(const std::string& message) {
  std::fprintf(stderr, "bench: %s\n", message.c_str());
  return 2;
}

// The benchmark is a load generator: keep it pointed at this machine.
bool IsLoopback(const std::string& address) {
  if (absl::StartsWith(address, "unix:")) return true;  // a Unix socket is on this machine by definition
  std::string host = address;
  if (absl::StartsWith(host, "ipv4:")) host = host.substr(5);
  if (absl::StartsWith(host, "ipv6:")) host = host.substr(5);
  if (absl::StartsWith(host, "[")) {
    const size_t close = host.find(']');
    return close != std::string::npos && host.substr(1, close - 1) == "::1";
  }
  host = host.substr(0, host.rfind(':'));
  return host == "localhost" || absl::StartsWith(host, "127.");
}

// The 1-minute load average (Linux), or -1: benchmarks on a shared machine must say how loaded
// it was.
double LoadAverage() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return -1;
  double load = -1;
  if (std::fscanf(f, "%lf", &load) != 1) load = -1;
  std::fclose(f);
  return load;
}

int RunBench(const Args& args) {
  if (!args.positional().empty()) {
    // The sweep starts and stops service processes, which a shell script does more plainly.
    return UsageError(args.positional()[0] == "sweep"
                          ? "the policy sweep is scripts/bench-sweep.sh (see docs/benchmarks.md)"
                          : "unexpected argument '" + args.positional()[0] + "'");
  }
  const std::string router = args.Require("router");
  const std::string workload_path = args.Require("workload");
  const std::string rates_text = args.GetString("rates", "1");
  const std::string concurrency_text = args.GetString("concurrency");
  const double duration = args.GetDouble("duration", 30);
  const double drain = args.GetDouble("drain", 60);
  const long long max_tokens = args.GetInt("max-tokens", 128);
  const long long max_inflight = args.GetInt("max-inflight", 64);
  const long long warmup = args.GetInt("warmup", 2);
  const long long seed = args.GetInt("seed", 0);
  const double wait = args.GetDouble("wait", 30);
  const std::string out_prefix = args.GetString("out-prefix");
  const std::string label = args.GetString("label");
  const std::string drafter = args.GetString("drafter");
  const double temperature = args.GetDouble("temperature", 0);
  const long long top_k = args.GetInt("top-k", 0);
  const bool ignore_eos = args.Has("ignore-eos");
  const bool progress = !args.Has("no-progress");
  args.CheckAllUsed();

  if (!IsLoopback(router))
    return UsageError("--router must be a loopback address (127.x.x.x, localhost, [::1]) or unix:PATH");
  if (!(duration > 0 && duration <= 3600))
    return UsageError("--duration must be in (0, 3600] seconds");
  if (!(drain >= 0 && drain <= 3600)) return UsageError("--drain must be in [0, 3600] seconds");
  if (max_tokens < 1 || max_tokens > bench::kMaxItemTokens)
    return UsageError("--max-tokens out of range");
  if (max_inflight < 1 || max_inflight > kMaxConcurrency)
    return UsageError("--max-inflight must be in 1..1024");
  if (warmup < 0 || warmup > 100) return UsageError("--warmup must be in 0..100");
  if (seed < 0) return UsageError("--seed must be >= 0");
  if (!(temperature >= 0 && temperature <= 100)) return UsageError("--temperature must be in [0, 100]");
  if (top_k < 0 || top_k > 1000000) return UsageError("--top-k must be in 0..1000000");
  if (args.Has("top-k") && !(temperature > 0)) return UsageError("--top-k needs --temperature above 0");

  std::vector<double> rates;
  std::vector<int> concurrencies;
  if (!concurrency_text.empty()) {
    if (args.Has("rates")) return UsageError("give --rates or --concurrency, not both");
    auto parsed = bench::ParseConcurrencies(concurrency_text, kMaxConcurrency);
    if (!parsed.ok()) return UsageError(std::string(parsed.status().message()));
    concurrencies = *parsed;
  } else {
    auto parsed = bench::ParseRates(rates_text);
    if (!parsed.ok()) return UsageError(std::string(parsed.status().message()));
    rates = *parsed;
  }
  auto items = bench::LoadWorkload(workload_path);
  if (!items.ok()) return UsageError(std::string(items.status().message()));

  if (absl::Status s = rpc::WaitForHealthy(router, absl::Seconds(wait)); !s.ok()) {
    std::fprintf(stderr, "bench: router %s is not serving: %s\n", router.c_str(),
                 std::string(s.message()).c_str());
    return 1;
  }
  bench::RouterClient client(router);
  auto info = client.GetServerInfo(absl::Seconds(10));
  if (!info.ok()) {
    std::fprintf(stderr, "bench: %s\n", std::string(info.status().message()).c_str());
    return 1;
  }
  std::printf("router %s: policy %s, model %s, drafters [%s]; workload %s (%zu prompts)\n",
              router.c_str(), info->policy().c_str(), info->model_name().c_str(),
              absl::StrJoin(info->drafters(), ",").c_str(), workload_path.c_str(), items->size());

  bench::LoadOptions options;
  options.duration_s = duration;
  options.drain_s = drain;
  options.max_inflight = static_cast<int>(max_inflight);
  options.seed = static_cast<uint64_t>(seed);
  options.default_max_tokens = static_cast<int>(max_tokens);
  options.ignore_eos = ignore_eos;
  options.drafter = drafter;
  options.temperature = static_cast<float>(temperature);
  options.top_k = static_cast<int>(top_k);
  options.progress = progress;

  // Warm-up requests (not recorded): the first calls pay for connection set-up and cold caches.
  for (long long i = 0; i < warmup; ++i) {
    const auto start = std::chrono::steady_clock::now();
    bench::RequestRecord r = client.Generate(
        bench::MakeRequest((*items)[static_cast<size_t>(i) % items->size()], options), start,
        start + std::chrono::seconds(static_cast<int>(drain) + 30));
    if (!r.ok) {
      std::fprintf(stderr, "bench: warm-up request failed: %s\n", r.error.c_str());
      return 1;
    }
  }

  std::vector<bench::LevelResult> levels;
  const size_t count = concurrencies.empty() ? rates.size() : concurrencies.size();
  for (size_t i = 0; i < count; ++i) {
    bench::LevelResult level;
    if (concurrencies.empty()) {
      level.rate = rates[i];
      options.rate = rates[i];
      options.concurrency = 0;
    } else {
      level.concurrency = concurrencies[i];
      options.concurrency = concurrencies[i];
    }
    options.label = bench::LevelName(level);
    bench::LoadResult load = bench::RunLoad(&client, *items, options);
    level.records = std::move(load.records);
    level.dropped = load.dropped;
    level.load_average = LoadAverage();
    level.summary = bench::SummarizeRun(level.records);
    if (auto after = client.GetServerInfo(absl::Seconds(10)); after.ok()) {
      level.server_state = after->policy_state_json();
      level.server_info = after->server_info_json();
    }
    std::printf("%s", bench::FormatLevel(level).c_str());
    std::fflush(stdout);
    levels.push_back(std::move(level));
  }
  std::printf("\npolicy %s, workload %s\n%s", info->policy().c_str(), workload_path.c_str(),
              bench::FormatTable(levels).c_str());

  if (!out_prefix.empty()) {
    nlohmann::json settings = {
        {"router", router},
        {"policy", info->policy()},
        {"model", info->model_name()},
        {"drafters", std::vector<std::string>(info->drafters().begin(), info->drafters().end())},
        {"workload", workload_path},
        {"prompts", items->size()},
        {"duration_s", duration},
        {"drain_s", drain},
        {"max_tokens", max_tokens},
        {"max_inflight", max_inflight},
        {"seed", seed},
        {"ignore_eos", ignore_eos},
        {"drafter", drafter},
        {"temperature", temperature},
        {"top_k", top_k},
        {"label", label}};
    for (const auto& [path, contents] : std::vector<std::pair<std::string, std::string>>{
             {out_prefix + ".csv", bench::SummaryCsv(levels)},
             {out_prefix + "_requests.csv", bench::RequestsCsv(levels)},
             {out_prefix + ".json", bench::ToJson(settings, levels).dump(1)}}) {
      if (absl::Status s = bench::WriteFile(path, contents); !s.ok()) {
        std::fprintf(stderr, "bench: %s\n", std::string(s.message()).c_str());
        return 1;
      }
    }
    std::printf("wrote %s.csv, %s_requests.csv, %s.json\n", out_prefix.c_str(), out_prefix.c_str(),
                out_prefix.c_str());
  }
  int64_t failed = 0;
  for (const bench::LevelResult& level : levels) failed += level.summary.failed + level.dropped;
  return failed > 0 ? 3 : 0;
}

RegisterCommand kRegister(
    "bench", "serving benchmark against a loopback router (throughput, TTFT, TPOT, ITL, E2E, accept length)",
    "  --router ADDR             the router's address; loopback or unix:PATH only (required)\n"
    "  --workload FILE.jsonl     prompts, one JSON object a line (required)\n"
    "  --rates R1,R2,...|inf     Poisson request rates per second, one level each (1)\n"
    "  --concurrency C1,C2,...   closed-loop client counts instead of --rates\n"
    "  --duration S              seconds of sending per level (30)\n"
    "  --drain S                 seconds a level waits for its requests after sending (60)\n"
    "  --max-tokens N            max_tokens of every request (128)\n"
    "  --max-inflight N          requests in flight at most (64)\n"
    "  --warmup N                requests sent and discarded before the first level (2)\n"
    "  --seed S                  seed of arrivals, prompt order and sampled requests' seeds (0)\n"
    "  --temperature T           sample every request at temperature T, each with a seed of its\n"
    "                            own (from --seed and its prompt's id); 0 = greedy (0)\n"
    "  --top-k K                 with --temperature: sample from the K likeliest tokens (0 = all)\n"
    "  --wait S                  seconds to wait for the router to answer (30)\n"
    "  --ignore-eos              generate max_tokens tokens whatever the model emits\n"
    "  --drafter POOL            drafter pool to ask for\n"
    "  --out-prefix PATH         write PATH.csv, PATH_requests.csv and PATH.json\n"
    "  --label TEXT              label stored with the results\n"
    "  --no-progress             no progress line\n",
    RunBench);

}  // namespace
}  // namespace splitspec::tools
