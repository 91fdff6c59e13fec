// `splitspec profile`: measures a running verifier and drafter over a grid of batch sizes,
// context lengths and tokens per request, fits the router's latency model
//   T_fwd = alpha * N_context + gamma * N_batched + delta
// per model by least squares (router/latency_model.h FitForward), reports R^2 and the worst
// relative error of each fit and the per-RPC overhead (wall time minus the worker's own
// compute time), and writes the JSON that `splitspec-router --latency-model` loads.
//
// Why the services' reported compute times and not wall times: the router adds the RPC
// overhead separately (rpc_overhead_seconds), so the forward terms must not include it.
//
// How each measurement maps onto the model's features (the same ones the router predicts
// with, router/router_step.cc and LatencyModel::RawDraftSeconds):
// - verifier step, B requests of history length C_i with chains of k_i nodes: one forward with
//   N_context = sum C_i and N_batched = sum (1 + k_i);
// - draft-model Propose of depth k: k forwards of one token per request, forward s reading
//   C_i + s - 1 context tokens; dividing the call's time by k gives one sample with
//   N_context = sum (C_i + (k - 1) / 2) and N_batched = B of the per-forward model.
// A model-free drafter (n-gram: vocab 0) gets the median Propose time as its constant.
// Each model's batch shape (the target's by tokens fed, a draft model's by requests in a
// forward) is the median measured / fitted time per size (profile_fit.h BatchFactors).
//
// The steps: read the flags, connect to the workers and check they can take the grid,
// measure the grid (profile_grid.h), fit each model (profile_fit.h), write the JSON.
//
// Each grid point keeps the FASTEST of its repeats: interference from other processes (or
// other cores' work) only ever adds time, so the minimum is the estimate least hurt by it.
// The router refuses negative coefficients, so when the unconstrained fit has one (noise on a
// term too small to measure) the fit is redone with that term at zero: the best
// non-negative least-squares fit over the subsets of terms, which is exact NNLS for 3 terms.
// Samples a stall inflated beyond any fit (see FitRobust) are set aside, at most a quarter of
// them, and their number is reported next to R^2 so a noisy run is visible as such.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/rpc/worker_clients.h"
#include "nlohmann/json.hpp"
#include "router/latency_model.h"
#include "tools/command.h"
#include "tools/profile_fit.h"
#include "tools/profile_grid.h"

namespace splitspec::tools {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t index = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  return v[index];
}

bool ParseList(const std::string& text, int32_t min_value, std::vector<int32_t>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int32_t value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < min_value) return false;
    out->push_back(value);
  }
  return !out->empty();
}

nlohmann::json FitJson(const router::ForwardFit& fit, size_t samples, bool constrained, size_t discarded) {
  return {{"r2", fit.r2},
          {"worst_relative_error", fit.worst_relative_error},
          {"samples", samples},
          {"discarded_outliers", discarded},
          {"non_negative_constrained", constrained}};
}

void PrintFit(const char* name, const router::ForwardFit& fit, size_t samples, bool constrained, size_t discarded) {
  const router::ForwardCoefficients& c = fit.coefficients;
  std::printf("%-8s alpha=%.4g s/ctx-token  gamma=%.4g s/token  delta=%.4g s   R^2=%.4f  worst relative error=%.1f%%"
              "  (%zu samples%s%s)\n",
              name, c.alpha, c.gamma, c.delta, fit.r2, 100.0 * fit.worst_relative_error, samples - discarded,
              discarded > 0 ? absl::StrCat(", ", discarded, " outliers set aside").c_str() : "",
              constrained ? ", refit with coefficients >= 0" : "");
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "profile: %s\n", message.c_str());
  return 1;
}

// "ADDR" (pool `fallback_pool`) or "NAME=ADDR,NAME=ADDR...".
bool ParseDrafters(const std::string& text, const std::string& fallback_pool, std::vector<DrafterUnderTest>* out) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    DrafterUnderTest d;
    const size_t eq = part.find('=');
    d.pool = eq == absl::string_view::npos ? fallback_pool : std::string(part.substr(0, eq));
    d.address = std::string(eq == absl::string_view::npos ? part : part.substr(eq + 1));
    if (d.pool.empty() || d.address.empty()) return false;
    for (const DrafterUnderTest& other : *out) {
      if (other.pool == d.pool) return false;
    }
    out->push_back(std::move(d));
  }
  return !out->empty();
}

// What the flags ask for.
struct ProfileRequest {
  std::string verifier_address;
  std::vector<DrafterUnderTest> drafters;
  std::string out_path;
  Grid grid;
  std::string grid_text;  // the grid as given, for the banner
  uint64_t seed = 1;
  double wait_seconds = 30;
  bool verbose = false;
};

// Step 1: the flags. An error message, or nothing when they are usable.
std::optional<std::string> ReadFlags(const Args& args, ProfileRequest* request) {
  const std::string drafter_flag = args.Require("drafter");
  request->verifier_address = args.Require("verifier");
  request->out_path = args.GetString("out", "latency.json");
  if (!ParseDrafters(drafter_flag, args.GetString("pool", "default"), &request->drafters)) {
    return "--drafter must be ADDR or NAME=ADDR[,NAME=ADDR...] with distinct names";
  }
  const std::string batch_text = args.GetString("batch-sizes", "1,2,4,8");
  const std::string context_text = args.GetString("contexts", "32,128,384");
  const std::string depth_text = args.GetString("depths", "0,2,4");
  Grid& grid = request->grid;
  if (!ParseList(batch_text, 1, &grid.batch_sizes)) {
    return "--batch-sizes must be a comma-separated list of integers >= 1";
  }
  if (!ParseList(context_text, 1, &grid.contexts)) {
    return "--contexts must be a comma-separated list of integers >= 1";
  }
  if (!ParseList(depth_text, 0, &grid.depths)) return "--depths must be a comma-separated list of integers >= 0";
  grid.repeats = static_cast<int32_t>(args.GetInt("repeats", 5));
  if (grid.repeats < 1) return "--repeats must be >= 1";
  request->grid_text = absl::StrCat("batch sizes ", batch_text, ", contexts ", context_text, ", depths ", depth_text,
                                    ", ", grid.repeats, " repeats");
  request->seed = args.GetUint64("seed", 1);
  request->wait_seconds = args.GetDouble("wait-seconds", 30);
  request->verbose = args.Has("verbose");
  args.CheckAllUsed();
  return std::nullopt;
}

// Step 2: every worker serves, takes the grid's deepest draft, and the drafters share the
// verifier's vocabulary. Fills each drafter's client and info.
absl::StatusOr<spec::WorkerInfo> ConnectWorkers(rpc::VerifierClient& verifier, ProfileRequest& request) {
  const absl::Duration wait = absl::Seconds(request.wait_seconds);
  if (absl::Status s = rpc::WaitForHealthy(request.verifier_address, wait); !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("verifier ", request.verifier_address, " is not serving: ", s.ToString()));
  }
  absl::StatusOr<spec::WorkerInfo> verifier_info = verifier.GetInfo();
  if (!verifier_info.ok()) {
    return absl::UnavailableError(absl::StrCat("verifier GetInfo: ", verifier_info.status().ToString()));
  }
  const std::vector<int32_t>& depths = request.grid.depths;
  const int32_t max_depth = *std::max_element(depths.begin(), depths.end());
  if (max_depth > verifier_info->max_draft_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("--depths: ", max_depth,
                                                   " is above the verifier's max draft tokens ",
                                                   verifier_info->max_draft_tokens));
  }
  std::printf("profiling verifier %s (%s): %s\n", request.verifier_address.c_str(),
              verifier_info->model_name.c_str(), request.grid_text.c_str());
  for (DrafterUnderTest& d : request.drafters) {
    if (absl::Status s = rpc::WaitForHealthy(d.address, wait); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("drafter ", d.address, " is not serving: ", s.ToString()));
    }
    d.client = std::make_unique<rpc::DrafterClient>(rpc::MakeChannel(d.address));
    auto info = d.client->GetInfo();
    if (!info.ok()) {
      return absl::UnavailableError(absl::StrCat("drafter ", d.address, " GetInfo: ", info.status().ToString()));
    }
    d.info = *info;
    if (max_depth > d.info.max_draft_tokens) {
      return absl::InvalidArgumentError(absl::StrCat("--depths: ", max_depth, " is above drafter ", d.pool,
                                                     "'s max draft tokens ", d.info.max_draft_tokens));
    }
    if (d.info.vocab_size != 0 && d.info.vocab_size != verifier_info->vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("drafter ", d.pool, " has vocab ", d.info.vocab_size,
                                                     ", the verifier ", verifier_info->vocab_size));
    }
    std::printf("  drafter pool '%s': %s (%s)\n", d.pool.c_str(), d.address.c_str(),
                d.info.vocab_size == 0 ? "model-free" : d.info.model_name.c_str());
  }
  std::fflush(stdout);
  return verifier_info;
}

// Step 3's report: skipped cells, and with --verbose every sample.
void PrintMeasurements(const Profiler& profiler, const std::vector<DrafterUnderTest>& drafters, bool verbose) {
  for (const std::string& cell : profiler.skipped()) {
    std::printf("skipped %s: does not fit a worker's free KV blocks\n", cell.c_str());
  }
  if (!verbose) return;
  for (const router::ForwardSample& x : profiler.target_samples()) {
    std::printf("  target  n_context %8.0f  n_batched %5.0f  %9.1f us\n", x.n_context, x.n_batched, 1e6 * x.seconds);
  }
  for (const DrafterUnderTest& d : drafters) {
    for (const router::ForwardSample& x : d.samples) {
      std::printf("  %-7s n_context %8.0f  n_batched %5.0f  %9.1f us/forward\n", d.pool.c_str(), x.n_context,
                  x.n_batched, 1e6 * x.seconds);
    }
  }
}

// A fitted latency model and how well each part fits (the JSON's "fit" object).
struct FittedModel {
  router::LatencyModel model;
  nlohmann::json fit_info;
};

void PrintBatchShape(const std::string& model, const std::map<int32_t, double>& factors) {
  std::printf("%s batch shape (measured / line, by tokens fed):", model.c_str());
  for (const auto& [n, f] : factors) std::printf(" %d:%.2f", n, f);
  std::printf("\n");
}

// Step 4: the target's fit, each drafter's (a model-free drafter gets its median Propose time
// as a constant), and the RPC overhead; printed as they are made.
absl::StatusOr<FittedModel> FitLatencyModel(const Profiler& profiler, const std::vector<DrafterUnderTest>& drafters,
                                            const spec::WorkerInfo& verifier_info) {
  bool constrained = false;
  size_t discarded = 0;
  auto target_fit = FitRobust(profiler.target_samples(), &constrained, &discarded);
  if (!target_fit.ok()) {
    return absl::Status(target_fit.status().code(), absl::StrCat("target fit: ", target_fit.status().message()));
  }
  // Start from a model with no drafters (the default constructor carries the A100 ones).
  auto model = router::LatencyModel::FromJson({{"target", {{"alpha", 0}, {"gamma", 0}, {"delta", 0}}}});
  if (!model.ok()) return model.status();
  FittedModel fitted{*model, nlohmann::json::object()};
  fitted.model.set_target(target_fit->coefficients);
  fitted.fit_info["target"] = FitJson(*target_fit, profiler.target_samples().size(), constrained, discarded);
  PrintFit("target", *target_fit, profiler.target_samples().size(), constrained, discarded);
  fitted.model.set_target_batch_factors(BatchFactors(profiler.target_samples(), target_fit->coefficients));
  PrintBatchShape("target", fitted.model.target_batch_factors());
  fitted.fit_info["drafters"] = nlohmann::json::object();
  for (const DrafterUnderTest& d : drafters) {
    router::DrafterCost cost;
    if (d.info.vocab_size == 0) {
      cost.model_free = true;
      cost.constant_seconds = Median(d.propose_seconds);
      fitted.fit_info["drafters"][d.pool] = {{"kind", "model_free"}, {"samples", d.propose_seconds.size()}};
      std::printf("%-8s model-free: %.1f us per Propose (median of %zu)\n", d.pool.c_str(),
                  1e6 * cost.constant_seconds, d.propose_seconds.size());
    } else {
      auto draft_fit = FitRobust(d.samples, &constrained, &discarded);
      if (!draft_fit.ok()) {
        return absl::Status(draft_fit.status().code(),
                            absl::StrCat("drafter ", d.pool, " fit: ", draft_fit.status().message()));
      }
      cost.forward = draft_fit->coefficients;
      fitted.fit_info["drafters"][d.pool] = FitJson(*draft_fit, d.samples.size(), constrained, discarded);
      PrintFit(d.pool.c_str(), *draft_fit, d.samples.size(), constrained, discarded);
    }
    fitted.model.set_drafter(d.pool, cost);
    if (!cost.model_free) {
      fitted.model.set_drafter_batch_factors(d.pool, BatchFactors(d.samples, cost.forward));
      PrintBatchShape(d.pool, fitted.model.drafter_batch_factors(d.pool));
    }
  }
  const double rpc_p50 = Median(profiler.rpc_overheads());
  const double rpc_p99 = Quantile(profiler.rpc_overheads(), 0.99);
  std::printf("rpc overhead (wall - compute) per call: p50 %.0f us, p99 %.0f us (%zu calls)\n", 1e6 * rpc_p50,
              1e6 * rpc_p99, profiler.rpc_overheads().size());
  fitted.model.set_rpc_seconds(rpc_p50);
  fitted.fit_info["rpc_overhead_p99_seconds"] = rpc_p99;
  std::string names;
  for (const DrafterUnderTest& d : drafters) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", d.pool, " = ",
                    d.info.vocab_size == 0 ? std::string("model-free") : d.info.model_name);
  }
  fitted.model.set_description(absl::StrCat("profiled by `splitspec profile`: target ", verifier_info.model_name,
                                            "; drafters ", names, "; target fit R^2 ",
                                            absl::StrFormat("%.4f", target_fit->r2)));
  return fitted;
}

// Step 5: the JSON the router loads, with the fit report and the grid; refused (not written)
// when the router would refuse to read it.
absl::Status WriteLatencyModel(const FittedModel& fitted, const Grid& grid, double seconds,
                               const std::string& out_path) {
  nlohmann::json out = fitted.model.ToJson();
  nlohmann::json fit_info = fitted.fit_info;
  fit_info["grid"] = {{"batch_sizes", grid.batch_sizes},
                      {"contexts", grid.contexts},
                      {"depths", grid.depths},
                      {"repeats", grid.repeats}};
  fit_info["seconds"] = seconds;
  out["fit"] = fit_info;
  if (auto check = router::LatencyModel::FromJson(out); !check.ok()) {
    return absl::InternalError(absl::StrCat("the fitted model does not load: ", check.status().ToString()));
  }
  std::ofstream file(out_path);
  file << out.dump(2) << "\n";
  file.close();
  if (!file) return absl::PermissionDeniedError(absl::StrCat("cannot write ", out_path));
  return absl::OkStatus();
}

int RunProfile(const Args& args) {
  ProfileRequest request;
  if (std::optional<std::string> error = ReadFlags(args, &request)) return Fail(*error);
  rpc::VerifierClient verifier(rpc::MakeChannel(request.verifier_address));
  absl::StatusOr<spec::WorkerInfo> verifier_info = ConnectWorkers(verifier, request);
  if (!verifier_info.ok()) return Fail(std::string(verifier_info.status().message()));

  const auto start = Clock::now();
  Profiler profiler(verifier, *verifier_info, request.drafters, request.grid, request.seed);
  if (absl::Status s = profiler.Run(); !s.ok()) return Fail(s.ToString());
  PrintMeasurements(profiler, request.drafters, request.verbose);

  absl::StatusOr<FittedModel> fitted = FitLatencyModel(profiler, request.drafters, *verifier_info);
  if (!fitted.ok()) return Fail(fitted.status().ToString());
  if (absl::Status s = WriteLatencyModel(*fitted, request.grid, SecondsSince(start), request.out_path); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  std::printf("wrote %s (%.1f s)\n", request.out_path.c_str(), SecondsSince(start));
  return 0;
}

const RegisterCommand kRegister(
    "profile", "measure a verifier and drafters and fit the router's latency model",
    "  --verifier ADDR           the verifier's address (required)\n"
    "  --drafter ADDR|NAME=ADDR[,NAME=ADDR...]  drafters to measure (required)\n"
    "  --pool NAME               pool name of a drafter given without one (default)\n"
    "  --out FILE                latency model to write (latency.json)\n"
    "  --batch-sizes B1,B2,...   batch sizes to measure (1,2,4,8)\n"
    "  --contexts C1,C2,...      context lengths to measure (32,128,384)\n"
    "  --depths D1,D2,...        draft depths to measure (0,2,4)\n"
    "  --repeats N               timed repeats per grid point (5)\n"
    "  --seed S                  seed of the random prompts (1)\n"
    "  --wait-seconds S          how long to wait for the workers (30)\n"
    "  --verbose                 print every measurement\n",
    RunProfile);

}  // namespace
}  // namespace splitspec::tools
