// metrics_bench: cost of the metrics calls on the step loop's hot path, per call, and as a
// percentage of a 10 ms speculative step (printed under the table), so it can be quoted against
// the step time. The argument is the batch size (requests per step). CPU time is the figure to
// quote: wall time also counts other processes sharing the machine.
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/metrics/metrics_registry.h"
#include "common/metrics/router_serving_metrics.h"
#include "common/metrics/router_spec_metrics.h"
#include "common/metrics/worker_metrics.h"

namespace splitspec::metrics {
namespace {

constexpr double kStepSeconds = 10e-3;

// Marks a benchmark whose iteration is one step's worth of hot-path calls; the reporter below
// prints its CPU time as a share of a kStepSeconds step.
void ReportStepFraction(benchmark::State& state) { state.counters["per_step"] = 1; }

// The console table, then one line per step benchmark: ns per step and % of a 10 ms step.
class StepShareReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.counters.count("per_step") == 0 || run.iterations == 0) continue;
      const double ns = run.cpu_accumulated_time / static_cast<double>(run.iterations) * 1e9;
      lines_.push_back(run.benchmark_name() + ": " + std::to_string(ns) + " ns CPU per step = " +
                       std::to_string(100.0 * ns * 1e-9 / kStepSeconds) + " % of a 10 ms step");
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    for (const std::string& line : lines_) std::printf("%s\n", line.c_str());
  }

 private:
  std::vector<std::string> lines_;
};

std::unique_ptr<RouterSpecMetrics> MakeSpec(MetricsRegistry& registry) {
  RouterSpecMetricsOptions options;
  options.pool = "draft-model";
  options.policy = "smartspec";
  options.max_k = 8;
  return *RouterSpecMetrics::Create(registry, options);
}

std::vector<ProposalOutcome> RandomOutcomes(int n) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> k(0, 8);
  std::vector<ProposalOutcome> out(n);
  for (auto& o : out) {
    o.proposed = k(rng);
    o.accepted = o.proposed == 0 ? 0 : std::uniform_int_distribution<int>(0, o.proposed)(rng);
  }
  return out;
}

std::vector<TokenEmission> Emissions(const std::vector<ProposalOutcome>& outcomes) {
  std::vector<TokenEmission> out;
  for (const auto& o : outcomes) out.push_back({0.01, o.accepted + 1, false});
  return out;
}

// One RecordStep for the whole batch (the intended use).
void BM_SpecRecordStep(benchmark::State& state) {
  MetricsRegistry registry;
  auto spec = MakeSpec(registry);
  const auto outcomes = RandomOutcomes(static_cast<int>(state.range(0)));
  for (auto _ : state) spec->RecordStep(outcomes);
  ReportStepFraction(state);
}
BENCHMARK(BM_SpecRecordStep)->Arg(1)->Arg(32)->Arg(256);

// One RecordProposal per request: what the batched path saves.
void BM_SpecRecordProposalPerRequest(benchmark::State& state) {
  MetricsRegistry registry;
  auto spec = MakeSpec(registry);
  const auto outcomes = RandomOutcomes(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    for (const auto& o : outcomes) spec->RecordProposal(o.proposed, o.accepted);
  }
  ReportStepFraction(state);
}
BENCHMARK(BM_SpecRecordProposalPerRequest)->Arg(32);

void BM_ServingRecordStep(benchmark::State& state) {
  MetricsRegistry registry;
  auto serving = *RouterServingMetrics::Create(registry);
  const auto emissions = Emissions(RandomOutcomes(static_cast<int>(state.range(0))));
  const StepStageSeconds stages{0.0002, 0.002, 0.007, 0.0008};
  for (auto _ : state) serving->RecordStep(stages, emissions);
  ReportStepFraction(state);
}
BENCHMARK(BM_ServingRecordStep)->Arg(32);

// Everything the router records per step for a batch of 32: the total to quote.
void BM_RouterStepTotal(benchmark::State& state) {
  MetricsRegistry registry;
  auto spec = MakeSpec(registry);
  auto serving = *RouterServingMetrics::Create(registry);
  const auto outcomes = RandomOutcomes(static_cast<int>(state.range(0)));
  const auto emissions = Emissions(outcomes);
  const StepStageSeconds stages{0.0002, 0.002, 0.007, 0.0008};
  for (auto _ : state) {
    spec->RecordStep(outcomes);
    spec->SetGoodput(900, 850);
    serving->RecordStep(stages, emissions);
    serving->SetLoad(3, static_cast<int64_t>(outcomes.size()));
  }
  ReportStepFraction(state);
}
BENCHMARK(BM_RouterStepTotal)->Arg(32);

// A worker's per-forward calls.
void BM_WorkerForward(benchmark::State& state) {
  MetricsRegistry registry;
  auto worker = *WorkerMetrics::Create(registry, WorkerRole::kVerifier);
  for (auto _ : state) {
    worker->RecordForward(ForwardKind::kVerify, 0.007, 32, 160);
    worker->SetKvBlocks(1000, 3096);
    worker->SetLiveSessions(32);
  }
  ReportStepFraction(state);
}
BENCHMARK(BM_WorkerForward);

// A scrape of the router's registry (off the hot path: on the HTTP thread, every few seconds).
void BM_SerializeRouterRegistry(benchmark::State& state) {
  MetricsRegistry registry;
  auto spec = MakeSpec(registry);
  auto serving = *RouterServingMetrics::Create(registry);
  spec->RecordStep(RandomOutcomes(32));
  size_t bytes = 0;
  for (auto _ : state) bytes = registry.Serialize().size();
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_SerializeRouterRegistry);

}  // namespace
}  // namespace splitspec::metrics

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  splitspec::metrics::StepShareReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
