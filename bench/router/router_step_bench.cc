// router_step_bench: what a decode step's workers wait for the router, the time between an
// answer the step needed and the router's next request (RouterCore::RunStep's critical path),
// with the service's options and Prometheus metrics attached.
//
// The workers are in process and answer at once: the target's next token is a fixed function of
// the last one, and the drafter proposes exactly that chain, so every draft is accepted whole and
// every draft made ahead lands (the pipeline's best case). Each iteration is one RunStep.
//
// Arguments: concurrent requests, the pipeline (0 / 1), whether the verifier streams
// kFlushBytes through the caches in each Verify (1), as a target's forward does with its
// weights, so that the router runs with cold caches as it does between real forwards, and
// RouterOptions::defer_step_reports (0 / 1; the router binary's is 1). The benchmark's time
// (manual) is the workers' wait a step, its mean; p50_us and p90_us are the steps' percentiles;
// router_us is all of the router's time a step, its side work during verify calls included;
// tokens_per_step checks that every draft landed (k + 1 a request).
//
//   router_step_bench [--benchmark_filter=RouterStep/1/1/1]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/metrics/metrics_registry.h"
#include "router/clock.h"
#include "router/latency_model.h"
#include "router/policy.h"
#include "router/router_core.h"
#include "router/service/router_metrics.h"
#include "router/worker_clients.h"

namespace splitspec::router {
namespace {

constexpr int32_t kVocab = 32000;
constexpr int32_t kDepth = 3;  // static:3
constexpr size_t kFlushBytes = size_t{64} << 20;

int32_t Successor(int32_t token) { return static_cast<int32_t>((int64_t{token} * 7 + 3) % kVocab); }

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The workers' view of the router, in the order the loop makes its calls: their own time, and
// how long they waited for it, from an answer the step needed (a verify call's, a serial
// Propose's, a Prefill's) to the router's next request. Work the router does while a verify call
// is in flight (VerifyWhile's side work: tokens, drafts made ahead, held-back reports) is off
// that path, as on the step socket, where the request is sent before it and the answer read
// after it.
struct Timeline {
  double worker_seconds = 0;
  double waited_seconds = 0;
  double last_answer = -1;
  bool verify_in_flight = false;

  void Request() {
    if (!verify_in_flight && last_answer >= 0) waited_seconds += Now() - last_answer;
  }
  void Answer(double work_started) {
    const double now = Now();
    worker_seconds += now - work_started;
    if (!verify_in_flight) last_answer = now;
  }
};

// Room for any batch: the router never waits for KV blocks or shortens a draft.
spec::WorkerInfo SuccessorInfo(const std::string& name, int32_t blocks) {
  spec::WorkerInfo info;
  info.model_name = name;
  info.vocab_size = kVocab;
  info.total_blocks = info.free_blocks = blocks;
  info.max_draft_tokens = 64;
  return info;
}

class SuccessorVerifier : public VerifierClient {
 public:
  SuccessorVerifier(Timeline* timeline, bool flush) : timeline_(timeline), flush_(flush ? kFlushBytes : 0, 1) {}

  absl::StatusOr<std::vector<spec::PrefillResult>> Prefill(const std::vector<spec::PrefillItem>& items) override {
    timeline_->Request();
    const double start = Now();
    std::vector<spec::PrefillResult> out;
    for (const spec::PrefillItem& item : items) {
      pending_[item.id] = Successor(item.tokens.back());
      out.push_back({item.id, pending_[item.id], absl::OkStatus()});
    }
    timeline_->Answer(start);
    return out;
  }

  absl::StatusOr<spec::VerifyResponse> Verify(const std::vector<spec::VerifyItem>& items) override {
    timeline_->Request();
    return Compute(items);
  }

  // As the step socket client: the request goes out, the step's side work runs on the loop
  // thread while the call is in flight, then the answer is read.
  bool OverlapsWorkWithVerify() const override { return true; }
  absl::StatusOr<spec::VerifyResponse> VerifyWhile(const std::vector<spec::VerifyItem>& items,
                                                   const std::function<void()>& work) override {
    timeline_->Request();
    timeline_->verify_in_flight = true;
    work();
    timeline_->verify_in_flight = false;
    return Compute(items);
  }

  absl::Status Release(const std::vector<spec::RequestId>& ids) override {
    for (spec::RequestId id : ids) pending_.erase(id);
    return absl::OkStatus();
  }

  absl::StatusOr<spec::WorkerInfo> Info() override { return SuccessorInfo("successor", 1 << 20); }

 private:
  absl::StatusOr<spec::VerifyResponse> Compute(const std::vector<spec::VerifyItem>& items) {
    const double start = Now();
    StreamThroughCaches();
    spec::VerifyResponse response;
    for (const spec::VerifyItem& item : items) {
      spec::VerifyResult result;
      result.id = item.id;
      int32_t last = pending_[item.id];
      for (int32_t token : item.draft.tokens) {
        if (token != Successor(last)) break;
        result.tokens.push_back(token);
        last = token;
      }
      result.accept_length = static_cast<int32_t>(result.tokens.size());
      result.tokens.push_back(Successor(last));
      pending_[item.id] = result.tokens.back();
      response.results.push_back(std::move(result));
    }
    response.total_blocks = 1 << 20;
    response.free_blocks = 1 << 20;
    response.compute_seconds = 1e-3;
    timeline_->Answer(start);
    return response;
  }

  // A forward reads the model's weights: the router's lines leave the caches.
  void StreamThroughCaches() {
    uint64_t sum = 0;
    for (size_t i = 0; i < flush_.size(); i += 64) sum += flush_[i];
    benchmark::DoNotOptimize(sum);
  }

  Timeline* timeline_;
  std::vector<uint8_t> flush_;
  std::map<spec::RequestId, int32_t> pending_;  // the token each request's next step feeds
};

class SuccessorDrafter : public DrafterClient {
 public:
  explicit SuccessorDrafter(Timeline* timeline) : timeline_(timeline) {}

  // A serial Propose (the step waits for it) or one made ahead beside the verify call.
  absl::StatusOr<spec::ProposeResponse> Propose(const std::vector<spec::ProposeItem>& items) override {
    timeline_->Request();
    const double start = Now();
    spec::ProposeResponse response;
    for (const spec::ProposeItem& item : items) {
      std::vector<int32_t>& seen = sessions_[item.id];
      spec::ProposeResult result;
      result.id = item.id;
      if (item.known_length > static_cast<int32_t>(seen.size()) || item.new_tokens.empty()) {
        result.status = absl::FailedPreconditionError("session disagrees");
        response.results.push_back(std::move(result));
        continue;
      }
      seen.resize(static_cast<size_t>(item.known_length));
      seen.insert(seen.end(), item.new_tokens.begin(), item.new_tokens.end() - item.assumed_tokens);
      int32_t last = item.new_tokens.back();
      for (int32_t i = 0; i < item.shape.depth; ++i) {
        last = Successor(last);
        result.draft.tokens.push_back(last);
        result.draft.parents.push_back(i - 1);
      }
      response.results.push_back(std::move(result));
    }
    response.compute_seconds = 1e-4;
    timeline_->Answer(start);
    return response;
  }

  absl::Status Release(const std::vector<spec::RequestId>& ids) override {
    for (spec::RequestId id : ids) sessions_.erase(id);
    return absl::OkStatus();
  }

  absl::StatusOr<spec::WorkerInfo> Info() override { return SuccessorInfo("successor-draft", 0); }

 private:
  Timeline* timeline_;
  std::map<spec::RequestId, std::vector<int32_t>> sessions_;
};

LatencyModel ProfiledModel() {
  auto loaded =
      LatencyModel::Load(std::string(SPLITSPEC_SOURCE_DIR) + "/configs/latency/cpu-2core-epyc-f32-pair.json");
  return loaded.ok() ? *loaded : LatencyModel();
}

void RouterStep(benchmark::State& state) {
  const int requests = static_cast<int>(state.range(0));
  const bool pipeline = state.range(1) != 0;
  Timeline timeline;
  SuccessorVerifier verifier(&timeline, state.range(2) != 0);
  SuccessorDrafter drafter(&timeline);
  SteadyClock clock;
  // As router/main.cc sets them, and its metrics.
  RouterOptions options;
  options.max_k = 8;
  options.snapshot_every_steps = 32;
  options.defer_token_events = true;
  options.pipeline = pipeline;
  options.defer_step_reports = state.range(3) != 0;
  metrics::MetricsRegistry registry;
  RouterMetricsOptions metrics_options;
  metrics_options.pools = {"model"};
  metrics_options.policy = "static:3";
  auto metrics = RouterMetrics::Create(registry, metrics_options, &clock);
  auto policy = MakePolicy("static:" + std::to_string(kDepth), nlohmann::json::object());
  if (!metrics.ok() || !policy.ok()) {
    state.SkipWithError("setup failed");
    return;
  }
  (*metrics)->Install(&options);
  RouterCore core(options, &verifier, DrafterPools{{"model", &drafter}}, std::move(*policy), ProfiledModel(), &clock);
  (*metrics)->SetCore(&core);
  if (!core.Init().ok()) {
    state.SkipWithError("init failed");
    return;
  }
  int64_t delivered = 0;
  int running = 0;
  auto submit = [&](int32_t seed) {
    GenerateRequest request;
    for (int32_t i = 0; i < 200; ++i) request.prompt.push_back((seed * 131 + i * 17) % kVocab);
    request.max_tokens = 1024;
    request.ignore_eos = true;
    (*metrics)->RecordSubmitted();
    EventSink sink = [&](const StreamEvent& e) {
      delivered += static_cast<int64_t>(e.tokens.size());
      if (e.finished) --running;
    };
    if (core.Submit(std::move(request), (*metrics)->WrapSink(sink, clock.NowSeconds())).ok()) ++running;
  };
  int32_t seed = 0;
  std::vector<double> waits;
  double router_seconds = 0;
  for (auto _ : state) {
    while (running < requests) submit(++seed);
    const double workers_before = timeline.worker_seconds, waited_before = timeline.waited_seconds;
    const double start = Now();
    core.RunStep();
    router_seconds += (Now() - start) - (timeline.worker_seconds - workers_before);
    waits.push_back(timeline.waited_seconds - waited_before);
    state.SetIterationTime(waits.back());
  }
  std::sort(waits.begin(), waits.end());
  const auto percentile_us = [&waits](double q) {
    return waits.empty() ? 0.0 : 1e6 * waits[static_cast<size_t>(q * static_cast<double>(waits.size() - 1))];
  };
  const double steps = static_cast<double>(state.iterations());
  state.counters["p50_us"] = percentile_us(0.5);
  state.counters["p90_us"] = percentile_us(0.9);
  state.counters["router_us"] = 1e6 * router_seconds / steps;
  state.counters["tokens_per_step"] = static_cast<double>(delivered) / steps;
}

// Warm caches (the same work with its memory at hand), then cold ones with the reports in line
// and held back. A cold step streams kFlushBytes: a short minimum time.
BENCHMARK(RouterStep)->ArgsProduct({{1, 4}, {0, 1}, {0}, {1}})->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(RouterStep)
    ->ArgsProduct({{1, 4}, {0, 1}, {1}, {0, 1}})
    ->UseManualTime()
    ->MinTime(0.1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace splitspec::router

BENCHMARK_MAIN();
