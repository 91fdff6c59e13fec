// Discrete-event simulation of the router: the real RouterCore and policy against simulated
// workers (sim_workers.h) on a virtual clock, fed by Poisson arrivals. One call runs one
// (policy, request rate) cell; `splitspec simulate` sweeps a grid of them.
#ifndef SPLITSPEC_ROUTER_SIM_SIMULATOR_H_
#define SPLITSPEC_ROUTER_SIM_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "router/latency_model.h"
#include "router/router_core.h"
#include "router/sim/sim_workers.h"

namespace splitspec::router::sim {

struct LengthRange {
  int32_t min = 128;
  int32_t max = 128;  // uniform in [min, max]
};

struct SimConfig {
  SimHardware hardware;                       // true costs
  std::optional<LatencyModel> router_latency;  // what the router believes (default: the truth)
  AcceptanceProcessConfig acceptance;
  std::vector<std::string> pools = {"default"};  // drafter pools (names index the latency model)
  int32_t num_requests = 300;
  LengthRange input;
  LengthRange output;
  int32_t max_running = 256;
  int32_t max_k = 8;
  uint64_t seed = 1;
  int64_t max_steps = 5'000'000;  // safety net
  std::optional<double> forced_rate;  // every request accepts with this rate (tests)
  // Called after every decode step; may change the world (e.g. force an acceptance rate).
  std::function<void(const StepStats&, SimWorld&)> step_hook;
};

struct SimResult {
  std::string policy;
  double rate = 0;  // requests per second offered
  int32_t completed = 0;
  double mean_latency_s = 0, p50_latency_s = 0, p99_latency_s = 0;
  double throughput_tokens_per_s = 0;
  double mean_k = 0;       // mean proposal length over speculative request-steps
  double mean_batch = 0;
  double mean_accept_length = 0;
  int64_t steps = 0;
  int64_t drafter_prefills = 0;  // requests the drafter saw (prefill disabling skips some)
  nlohmann::json ToJson() const;
};

// `policy` is a MakePolicy name, or "smartspec:request" for the per-request granularity.
absl::StatusOr<SimResult> RunSimulation(const SimConfig& config, const std::string& policy,
                                        const nlohmann::json& policy_config, double rate);

}  // namespace splitspec::router::sim

#endif  // SPLITSPEC_ROUTER_SIM_SIMULATOR_H_
