// `splitspec simulate`: sweeps policies x request rates through the router core on a virtual
// clock (router/sim/) and prints latency, throughput and mean k per cell.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "router/policy.h"
#include "router/sim/simulator.h"
#include "tools/command.h"

namespace splitspec::tools {
namespace {

using router::sim::LengthRange;
using router::sim::RunSimulation;
using router::sim::SimConfig;
using router::sim::SimResult;

constexpr char kDefaultLatencyModel[] = "configs/latency/a100-7b-160m.json";

bool ParseRange(const std::string& text, LengthRange* out) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.empty() || parts.size() > 2) return false;
  if (!absl::SimpleAtoi(parts[0], &out->min)) return false;
  out->max = out->min;
  if (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &out->max)) return false;
  return out->min >= 1 && out->max >= out->min;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 2;
}

int RunSimulate(const Args& args) {
  SimConfig config;
  std::string latency_path = args.GetString("latency-model");
  if (latency_path.empty() && std::ifstream(kDefaultLatencyModel).good()) {
    latency_path = kDefaultLatencyModel;
  }
  if (!latency_path.empty()) {
    auto model = router::LatencyModel::Load(latency_path);
    if (!model.ok()) return Fail(std::string(model.status().message()));
    config.hardware.latency = *model;
  }
  if (args.Has("router-latency-model")) {
    auto model = router::LatencyModel::Load(args.GetString("router-latency-model"));
    if (!model.ok()) return Fail(std::string(model.status().message()));
    config.router_latency = *model;
  }
  nlohmann::json policy_config = nlohmann::json::object();
  if (args.Has("policy-config")) {
    auto j = router::LoadJsonFile(args.GetString("policy-config"));
    if (!j.ok()) return Fail(std::string(j.status().message()));
    policy_config = *j;
  }
  const std::vector<std::string> policies = absl::StrSplit(
      args.GetString("policies",
                     "none,static:1,static:3,static:5,sglang-tiers,smartspec,smartspec:request,"
                     "analytical,fsm,cache-fsm"),
      ',', absl::SkipEmpty());
  std::vector<double> rates;
  const std::vector<std::string> rate_list =
      absl::StrSplit(args.GetString("rates", "1,2,4,8,12,16,24,32"), ',', absl::SkipEmpty());
  for (const std::string& r : rate_list) {
    double v;
    if (!absl::SimpleAtod(r, &v) || !(v > 0)) return Fail("bad --rates entry '" + r + "'");
    rates.push_back(v);
  }
  config.num_requests = static_cast<int32_t>(args.GetIntInRange("requests", 300, 1, 1 << 20));
  if (!ParseRange(args.GetString("input-len", "128"), &config.input) ||
      !ParseRange(args.GetString("output-len", "128"), &config.output)) {
    return Fail("--input-len / --output-len take N or MIN:MAX with 1 <= MIN <= MAX");
  }
  config.acceptance.beta_a = args.GetDouble("beta-a", config.acceptance.beta_a);
  config.acceptance.beta_b = args.GetDouble("beta-b", config.acceptance.beta_b);
  config.acceptance.low_beta_a = args.GetDouble("low-beta-a", config.acceptance.low_beta_a);
  config.acceptance.low_beta_b = args.GetDouble("low-beta-b", config.acceptance.low_beta_b);
  config.acceptance.phase_switch_prob =
      args.GetDouble("phase-switch", config.acceptance.phase_switch_prob);
  if (!(config.acceptance.beta_a > 0 && config.acceptance.beta_b > 0 &&
        config.acceptance.low_beta_a > 0 && config.acceptance.low_beta_b > 0)) {
    return Fail("Beta parameters must be > 0");
  }
  if (!(config.acceptance.phase_switch_prob >= 0 && config.acceptance.phase_switch_prob <= 1)) {
    return Fail("--phase-switch is a probability: it must be in [0, 1]");
  }
  config.pools = absl::StrSplit(args.GetString("pools", "default"), ',', absl::SkipEmpty());
  config.max_k = static_cast<int32_t>(args.GetIntInRange("max-k", 8, 0, 256));
  config.max_running = static_cast<int32_t>(args.GetIntInRange("max-running", 256, 1, 1 << 16));
  config.seed = args.GetUint64("seed", 1);
  const std::string json_path = args.GetString("json");
  args.CheckAllUsed();

  std::printf("latency model: %s\n", config.hardware.latency.Summary().c_str());
  std::printf("%d requests per cell, input %d..%d, output %d..%d tokens, acceptance "
              "Beta(%.1f,%.1f) / low Beta(%.1f,%.1f), phase switch %.3f\n\n",
              config.num_requests, config.input.min, config.input.max, config.output.min,
              config.output.max, config.acceptance.beta_a, config.acceptance.beta_b,
              config.acceptance.low_beta_a, config.acceptance.low_beta_b,
              config.acceptance.phase_switch_prob);
  std::printf("%7s  %-18s %10s %10s %10s %10s %7s %7s %6s\n", "rate", "policy", "mean_s",
              "p50_s", "p99_s", "tok/s", "mean_k", "batch", "acc_l");
  const auto start = std::chrono::steady_clock::now();
  nlohmann::json cells = nlohmann::json::array();
  for (double rate : rates) {
    std::vector<SimResult> row;
    for (const std::string& policy : policies) {
      auto result = RunSimulation(config, policy, policy_config, rate);
      if (!result.ok()) return Fail(policy + ": " + std::string(result.status().message()));
      row.push_back(*result);
      cells.push_back(result->ToJson());
    }
    double best = 1e300;
    for (const SimResult& r : row) best = std::min(best, r.mean_latency_s);
    for (const SimResult& r : row) {
      std::printf("%7.2f  %-18s %10.3f %10.3f %10.3f %10.1f %7.2f %7.1f %6.2f%s\n", r.rate,
                  r.policy.c_str(), r.mean_latency_s, r.p50_latency_s, r.p99_latency_s,
                  r.throughput_tokens_per_s, r.mean_k, r.mean_batch, r.mean_accept_length,
                  r.mean_latency_s == best ? "  *" : "");
    }
    std::printf("\n");
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("(* = lowest mean latency at that rate; %zu cells in %.1f s)\n", cells.size(),
              elapsed);
  if (!json_path.empty()) {
    nlohmann::json out = {{"latency_model", config.hardware.latency.ToJson()},
                          {"requests_per_cell", config.num_requests},
                          {"cells", cells}};
    std::ofstream f(json_path);
    f << out.dump(2) << "\n";
    if (!f) return Fail("cannot write " + json_path);
  }
  return 0;
}

const RegisterCommand kRegister(
    "simulate", "sweep speculation policies x request rates through the router core on a virtual clock",
    "  --policies P1,P2,...      policies to compare (none,static:1,static:3,static:5,sglang-tiers,\n"
    "                            smartspec,smartspec:request,analytical,fsm,cache-fsm)\n"
    "  --rates R1,R2,...         request rates per second (1,2,4,8,12,16,24,32)\n"
    "  --requests N              requests per cell (300)\n"
    "  --input-len N|MIN:MAX     prompt tokens (128)\n"
    "  --output-len N|MIN:MAX    generated tokens (128)\n"
    "  --latency-model FILE      worker latency model (configs/latency/a100-7b-160m.json)\n"
    "  --router-latency-model FILE  the latency model the router plans with (default: the workers')\n"
    "  --policy-config FILE      JSON options of the policies\n"
    "  --pools P1,P2,...         drafter pool names (default)\n"
    "  --beta-a A --beta-b B     per-token acceptance ~ Beta(A, B)\n"
    "  --low-beta-a A --low-beta-b B  acceptance in the low phase\n"
    "  --phase-switch P          per-token probability of switching phase\n"
    "  --max-k K                 largest draft length (8)\n"
    "  --max-running N           requests decoding at once (256)\n"
    "  --seed S                  seed of arrivals, lengths and acceptance (1)\n"
    "  --json FILE               also write every cell as JSON\n",
    RunSimulate);

}  // namespace
}  // namespace splitspec::tools
