// planning_bench: CPU time of one step's proposal decision (SpeculationPolicy::DecideProposals,
// what RouterCore::PlanStep waits for between two verify calls), per policy, batch size and
// whether the batch's requests are speculative. The latency model is the 2-core EPYC profile
// of the bundled pair (configs/latency), the tree estimates those of a pool that has seen every
// shape. smartspec searches tree shapes for every speculative request, so its cost grows with
// them even when it then drafts nothing.
//
//   planning_bench [--benchmark_filter=smartspec]
// Arguments: requests in the batch, 1 when they are speculative (0: admitted without drafting);
// SmartspecPipelined: the same with the latency model priced for the pipeline (every goodput
// search also prices each pool's draft made ahead at every depth).
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "router/acceptance.h"
#include "router/latency_model.h"
#include "router/policies/policies.h"
#include "router/tree_acceptance.h"

namespace splitspec::router {
namespace {

constexpr char kPool[] = "model";

LatencyModel ProfiledModel() {
  auto loaded = LatencyModel::Load(std::string(SPLITSPEC_SOURCE_DIR) + "/configs/latency/cpu-2core-epyc-f32-pair.json");
  return loaded.ok() ? *loaded : LatencyModel();
}

// Estimates from a pool that has verified chains and trees of every width and depth.
TreeAcceptance SeasonedTrees() {
  TreeAcceptance trees;
  for (int round = 0; round < 50; ++round) {
    for (int width = 2; width <= 4; ++width) {
      for (int depth = 1; depth <= 8; ++depth) trees.Observe(kPool, depth, depth * width, (round + depth) % (depth + 1), true);
    }
  }
  return trees;
}

void Plan(benchmark::State& state, const std::string& name, bool pipeline = false) {
  LatencyModel latency = ProfiledModel();
  latency.set_pipeline(pipeline);
  const TreeAcceptance trees = SeasonedTrees();
  auto policy = MakePolicy(name, nlohmann::json::object());
  if (!policy.ok()) {
    state.SkipWithError(std::string(policy.status().message()).c_str());
    return;
  }
  PolicyInput input;
  input.max_k = 8;
  input.latency = &latency;
  input.tree_acceptance = &trees;
  const int n = static_cast<int>(state.range(0));
  for (int i = 0; i < n; ++i) {
    PolicyRequest r;
    r.id = i + 1;
    r.context_tokens = 200 + 100 * i;
    r.prompt_tokens = 100;
    r.speculative = state.range(1) != 0;
    r.pool = kPool;
    r.acceptance = 0.5;
    r.max_useful_k = 8;
    r.remaining_tokens = 64;
    input.requests.push_back(r);
  }
  for (auto _ : state) {
    std::vector<ProposalChoice> choices = (*policy)->DecideProposals(input);
    benchmark::DoNotOptimize(choices.data());
  }
}

void Smartspec(benchmark::State& state) { Plan(state, "smartspec"); }
void SmartspecPipelined(benchmark::State& state) { Plan(state, "smartspec", /*pipeline=*/true); }
void Static3(benchmark::State& state) { Plan(state, "static:3"); }

BENCHMARK(Smartspec)->ArgsProduct({{1, 4, 16}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(SmartspecPipelined)->ArgsProduct({{1, 4, 16}, {1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(Static3)->ArgsProduct({{1, 4, 16}, {1}})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace splitspec::router

BENCHMARK_MAIN();
