// The simulation loop: arrivals -> RouterCore steps on a virtual clock -> latency figures.
#include "router/sim/simulator.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"

namespace splitspec::router::sim {

nlohmann::json SimResult::ToJson() const {
  return {{"policy", policy},
          {"rate", rate},
          {"completed", completed},
          {"mean_latency_s", mean_latency_s},
          {"p50_latency_s", p50_latency_s},
          {"p99_latency_s", p99_latency_s},
          {"throughput_tokens_per_s", throughput_tokens_per_s},
          {"mean_k", mean_k},
          {"mean_batch", mean_batch},
          {"mean_accept_length", mean_accept_length},
          {"steps", steps},
          {"drafter_prefills", drafter_prefills}};
}

absl::StatusOr<SimResult> RunSimulation(const SimConfig& config, const std::string& policy,
                                        const nlohmann::json& policy_config, double rate) {
  if (!(rate > 0)) return absl::InvalidArgumentError("request rate must be > 0");
  if (config.num_requests < 1) return absl::InvalidArgumentError("num_requests must be >= 1");
  if (config.input.min < 1 || config.input.max < config.input.min || config.output.min < 1 ||
      config.output.max < config.output.min) {
    return absl::InvalidArgumentError("length ranges need 1 <= min <= max");
  }
  std::string name = policy;
  nlohmann::json pconf = policy_config.is_object() ? policy_config : nlohmann::json::object();
  if (policy == "smartspec:request") {
    name = "smartspec";
    pconf["granularity"] = "request";
  }
  auto made = MakePolicy(name, pconf);
  if (!made.ok()) return made.status();
  auto acceptance = ParseAcceptanceConfig(pconf);
  if (!acceptance.ok()) return acceptance.status();

  VirtualClock clock;
  SimWorld world(config.acceptance, config.seed * 7919 + 17);
  world.set_forced_rate(config.forced_rate);
  SimVerifier verifier(&config.hardware, &world, &clock);
  std::vector<std::unique_ptr<SimDrafter>> drafters;
  DrafterPools pools;
  for (const std::string& p : config.pools) {
    drafters.push_back(std::make_unique<SimDrafter>(p, &config.hardware, &world, &clock));
    pools[p] = drafters.back().get();
  }

  int64_t k_sum = 0, k_count = 0, batch_sum = 0, steps = 0;
  RouterOptions opt;
  opt.max_queue = config.num_requests + 1;
  opt.max_running = config.max_running;
  opt.max_k = config.max_k;
  opt.acceptance = *acceptance;
  opt.snapshot_every_steps = 1024;
  // The simulated drafters share one virtual clock and world: call them one at a time (the
  // latency model costs pools one after another as well).
  opt.parallel_pool_calls = false;
  opt.step_observer = [&](const StepStats& s) {
    ++steps;
    batch_sum += s.batch_size;
    for (int32_t k : s.k) k_sum += k;
    k_count += static_cast<int64_t>(s.k.size());
    if (config.step_hook) config.step_hook(s, world);
  };
  RouterCore core(opt, &verifier, pools, std::move(*made),
                  config.router_latency ? *config.router_latency : config.hardware.latency,
                  &clock);
  if (absl::Status s = core.Init(); !s.ok()) return s;

  // Workload: Poisson arrivals, uniform lengths, all drawn up front from the seed.
  std::mt19937_64 rng(config.seed);
  std::exponential_distribution<double> gap(rate);
  std::uniform_int_distribution<int32_t> in_len(config.input.min, config.input.max);
  std::uniform_int_distribution<int32_t> out_len(config.output.min, config.output.max);
  struct Arrival {
    double time;
    int32_t input, output;
  };
  std::vector<Arrival> arrivals;
  double t = 0;
  for (int32_t i = 0; i < config.num_requests; ++i) {
    t += gap(rng);
    arrivals.push_back({t, in_len(rng), out_len(rng)});
  }

  std::map<RequestId, double> arrival_of;
  std::vector<double> latencies;
  int64_t tokens_out = 0;
  double last_finish = 0;
  int32_t failed = 0;
  size_t next = 0;
  for (int64_t iter = 0; static_cast<int32_t>(latencies.size()) + failed < config.num_requests;
       ++iter) {
    if (iter > config.max_steps) {
      return absl::DeadlineExceededError(
          absl::StrCat("simulation of ", policy, " at rate ", rate, " did not finish"));
    }
    while (next < arrivals.size() && arrivals[next].time <= clock.NowSeconds()) {
      GenerateRequest r;
      r.prompt.assign(arrivals[next].input, 1);
      r.max_tokens = arrivals[next].output;
      const double arrived = arrivals[next].time;
      auto id = core.Submit(std::move(r), [&, arrived](const StreamEvent& e) {
        if (!e.finished) return;
        if (e.finish_reason == FinishReason::kError) {
          ++failed;
          return;
        }
        latencies.push_back(clock.NowSeconds() - arrived);
        tokens_out += e.usage.completion_tokens;
        last_finish = std::max(last_finish, clock.NowSeconds());
      });
      if (!id.ok()) return id.status();
      ++next;
    }
    if (core.Idle()) {
      if (next >= arrivals.size()) break;
      clock.AdvanceTo(arrivals[next].time);
      continue;
    }
    core.RunStep();
  }
  if (failed > 0) {
    return absl::InternalError(absl::StrCat(failed, " simulated requests failed"));
  }

  SimResult r;
  r.policy = policy;
  r.rate = rate;
  r.completed = static_cast<int32_t>(latencies.size());
  std::vector<double> sorted = latencies;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double x : sorted) sum += x;
  auto pct = [&sorted](double q) {
    return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * (sorted.size() - 1) + 0.5))];
  };
  if (!sorted.empty()) {
    r.mean_latency_s = sum / sorted.size();
    r.p50_latency_s = pct(0.5);
    r.p99_latency_s = pct(0.99);
  }
  const double span = last_finish - arrivals.front().time;
  r.throughput_tokens_per_s = span > 0 ? tokens_out / span : 0;
  r.mean_k = k_count > 0 ? static_cast<double>(k_sum) / k_count : 0;
  r.mean_batch = steps > 0 ? static_cast<double>(batch_sum) / steps : 0;
  r.mean_accept_length = core.Snapshot().mean_accept_length;
  r.steps = steps;
  for (const auto& d : drafters) r.drafter_prefills += d->prefilled_requests();
  return r;
}

}  // namespace splitspec::router::sim
