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
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/engine/sampling/sampler.h"
#include "common/rpc/worker_clients.h"
#include "nlohmann/json.hpp"
#include "router/latency_model.h"
#include "tools/command.h"

namespace splitspec::tools {
namespace {

using Clock = std::chrono::steady_clock;

// Session ids far from the router's own (which count up from 1), in case the services are
// shared with a running router.
constexpr spec::RequestId kFirstSessionId = 0x7072'6f66'0000'0000ULL;

struct Grid {
  std::vector<int32_t> batch_sizes;
  std::vector<int32_t> contexts;
  std::vector<int32_t> depths;  // draft nodes per request; the drafter skips 0
  int32_t repeats = 5;
};

// Progress on stderr, redrawn in place: [#####.....] done/total what.
class ProgressBar {
 public:
  explicit ProgressBar(int total) : total_(std::max(1, total)) {}
  void Update(int done, const std::string& what) {
    constexpr int kWidth = 30;
    const int filled = done * kWidth / total_;
    std::fprintf(stderr, "\r[%s%s] %3d/%d %-40s", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), done, total_, what.c_str());
    std::fflush(stderr);
  }
  void Finish() { std::fprintf(stderr, "\n"); }

 private:
  int total_;
};

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

// Least squares over a subset of the columns {n_context, n_batched, 1} (the others fixed at
// 0) by the normal equations; false when singular or when a fitted coefficient is negative.
bool FitSubset(absl::Span<const router::ForwardSample> samples, const bool use[3], double coef[3]) {
  int cols[3], m = 0;
  for (int c = 0; c < 3; ++c) {
    if (use[c]) cols[m++] = c;
  }
  auto feature = [](const router::ForwardSample& x, int c) {
    return c == 0 ? x.n_context : c == 1 ? x.n_batched : 1.0;
  };
  double a[3][4] = {};
  for (const router::ForwardSample& x : samples) {
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < m; ++j) a[i][j] += feature(x, cols[i]) * feature(x, cols[j]);
      a[i][3] += feature(x, cols[i]) * x.seconds;
    }
  }
  // Gauss-Jordan with partial pivoting on the m x m system (augmented in column 3).
  for (int i = 0; i < m; ++i) {
    int pivot = i;
    for (int r = i + 1; r < m; ++r) {
      if (std::fabs(a[r][i]) > std::fabs(a[pivot][i])) pivot = r;
    }
    if (!(std::fabs(a[pivot][i]) > 1e-300)) return false;
    for (int c = 0; c < 4; ++c) std::swap(a[i][c], a[pivot][c]);
    for (int r = 0; r < m; ++r) {
      if (r == i) continue;
      const double f = a[r][i] / a[i][i];
      for (int c = i; c < 4; ++c) a[r][c] -= f * a[i][c];
    }
  }
  coef[0] = coef[1] = coef[2] = 0;
  for (int i = 0; i < m; ++i) {
    coef[cols[i]] = a[i][3] / a[i][i];
    if (!(coef[cols[i]] >= 0) || !std::isfinite(coef[cols[i]])) return false;
  }
  return true;
}

// FitForward, or when it yields a negative coefficient the best fit with all coefficients
// >= 0 (R^2 and worst relative error recomputed for it).
absl::StatusOr<router::ForwardFit> FitNonNegative(absl::Span<const router::ForwardSample> samples,
                                                  bool* constrained) {
  *constrained = false;
  absl::StatusOr<router::ForwardFit> fit = router::FitForward(samples);
  if (!fit.ok()) return fit;
  const router::ForwardCoefficients& c = fit->coefficients;
  if (c.alpha >= 0 && c.gamma >= 0 && c.delta >= 0) return fit;
  *constrained = true;
  double mean = 0;
  for (const router::ForwardSample& x : samples) mean += x.seconds;
  mean /= static_cast<double>(samples.size());
  double best_sse = -1;
  router::ForwardFit best;
  for (int mask = 1; mask < 8; ++mask) {
    const bool use[3] = {(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
    double coef[3];
    if (!FitSubset(samples, use, coef)) continue;
    router::ForwardFit candidate;
    candidate.coefficients = {coef[0], coef[1], coef[2]};
    double sse = 0, sst = 0, worst = 0;
    for (const router::ForwardSample& x : samples) {
      const double predicted = candidate.coefficients.Predict(x.n_context, x.n_batched);
      sse += (predicted - x.seconds) * (predicted - x.seconds);
      sst += (x.seconds - mean) * (x.seconds - mean);
      if (x.seconds > 0) worst = std::max(worst, std::fabs(predicted - x.seconds) / x.seconds);
    }
    candidate.r2 = sst > 0 ? 1.0 - sse / sst : 1.0;
    candidate.worst_relative_error = worst;
    if (best_sse < 0 || sse < best_sse) {
      best_sse = sse;
      best = candidate;
    }
  }
  if (best_sse < 0) return absl::FailedPreconditionError("no non-negative fit exists for these samples");
  return best;
}

// FitNonNegative after trimming interference outliers: while the fit misses some sample by
// more than kOutlierRelativeError, the sample with the largest absolute residual (a stall
// inflates a time by orders of magnitude, so it is the one that pulls the fit most) is set
// aside and the fit redone, at most a quarter of the samples. `discarded` counts them.
constexpr double kOutlierRelativeError = 0.5;

absl::StatusOr<router::ForwardFit> FitRobust(std::vector<router::ForwardSample> samples, bool* constrained,
                                             size_t* discarded) {
  *discarded = 0;
  const size_t max_discarded = samples.size() / 4;
  while (true) {
    absl::StatusOr<router::ForwardFit> fit = FitNonNegative(samples, constrained);
    if (!fit.ok() || fit->worst_relative_error <= kOutlierRelativeError || *discarded >= max_discarded ||
        samples.size() <= 4) {
      return fit;
    }
    size_t worst = 0;
    double worst_residual = -1;
    for (size_t i = 0; i < samples.size(); ++i) {
      const double residual = std::fabs(fit->coefficients.Predict(samples[i].n_context, samples[i].n_batched) -
                                        samples[i].seconds);
      if (residual > worst_residual) {
        worst_residual = residual;
        worst = i;
      }
    }
    samples.erase(samples.begin() + static_cast<std::ptrdiff_t>(worst));
    ++*discarded;
  }
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A drafter being profiled: its client, what it reported, and what was measured on it.
struct DrafterUnderTest {
  std::string pool;
  std::string address;
  std::unique_ptr<rpc::DrafterClient> client;
  spec::WorkerInfo info;
  std::vector<router::ForwardSample> samples;  // per-forward samples (draft models)
  std::vector<double> propose_seconds;         // every measured Propose
  // Per request of the current cell: committed tokens the drafter holds (0 = none yet).
  std::vector<size_t> known;
};

// Runs the grid. Per (batch, context) cell: fresh sessions are prefilled on the verifier, and
// for each depth a verify step and then a Propose on every drafter are measured.
class Profiler {
 public:
  Profiler(rpc::VerifierClient& verifier, const spec::WorkerInfo& verifier_info,
           std::vector<DrafterUnderTest>& drafters, const Grid& grid, uint64_t seed)
      : verifier_(verifier), verifier_info_(verifier_info), drafters_(drafters), grid_(grid), rng_(seed) {}

  int StepsPerCell() const {
    int steps = 0;
    for (int32_t k : grid_.depths) steps += 1 + (k > 0 ? static_cast<int>(drafters_.size()) : 0);
    return steps;
  }
  int Steps() const { return static_cast<int>(grid_.batch_sizes.size() * grid_.contexts.size()) * StepsPerCell(); }

  // Runs the whole grid; cells that do not fit a KV cache are skipped with a note.
  absl::Status Run() {
    ProgressBar bar(Steps());
    int done = 0;
    const int32_t max_depth = *std::max_element(grid_.depths.begin(), grid_.depths.end());
    for (int32_t batch : grid_.batch_sizes) {
      for (int32_t context : grid_.contexts) {
        // Room: the prompt plus what the measured steps append (at most 1 + k per step).
        const int64_t per_request = context + static_cast<int64_t>(grid_.depths.size()) *
                                                  (grid_.repeats + 1) * (max_depth + 1) + max_depth + 16;
        bool fits = Fits(verifier_info_, batch, per_request);
        for (const DrafterUnderTest& d : drafters_) fits = fits && Fits(d.info, batch, per_request);
        if (!fits) {
          skipped_.push_back(absl::StrCat("B=", batch, " C=", context));
          done += StepsPerCell();
          bar.Update(done, absl::StrCat("skip B=", batch, " C=", context, " (KV)"));
          continue;
        }
        if (absl::Status s = RunCell(batch, context, bar, done); !s.ok()) {
          bar.Finish();
          return s;
        }
      }
    }
    bar.Update(done, "done");
    bar.Finish();
    return absl::OkStatus();
  }

  const std::vector<router::ForwardSample>& target_samples() const { return target_samples_; }
  const std::vector<double>& rpc_overheads() const { return rpc_overheads_; }
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  static bool Fits(const spec::WorkerInfo& info, int32_t batch, int64_t per_request) {
    if (info.total_blocks <= 0) return true;  // stateless (n-gram)
    const int64_t block = std::max(1, info.block_size);
    const int64_t blocks = static_cast<int64_t>(batch) * ((per_request + block - 1) / block);
    return blocks <= info.free_blocks;
  }

  // One (batch, context) cell; for each depth a warm-up step and `repeats` measured steps on
  // each service, the fastest repeat being the grid sample.
  absl::Status RunCell(int32_t batch, int32_t context, ProgressBar& bar, int& done) {
    const int32_t vocab = verifier_info_.vocab_size;
    std::vector<spec::RequestId> ids;
    std::vector<spec::PrefillItem> prefill;
    for (int32_t i = 0; i < batch; ++i) {
      spec::PrefillItem item;
      item.id = kFirstSessionId + next_id_++;
      for (int32_t t = 0; t < context; ++t) item.tokens.push_back(RandomToken(vocab));
      ids.push_back(item.id);
      prefill.push_back(std::move(item));
    }
    auto prefilled = verifier_.Prefill(prefill);
    if (!prefilled.ok()) return Annotate(prefilled.status(), "verifier Prefill");
    // Histories end with the pending token; the drafters catch up on them (unmeasured).
    std::vector<std::vector<int32_t>> histories;
    for (int32_t i = 0; i < batch; ++i) {
      histories.push_back(prefill[i].tokens);
      histories.back().push_back((*prefilled)[i].next_token);
    }
    for (DrafterUnderTest& d : drafters_) d.known.assign(ids.size(), 0);
    absl::Status status = absl::OkStatus();
    for (int32_t k : grid_.depths) {
      const std::string label = absl::StrCat("B=", batch, " C=", context, " k=", k);
      bar.Update(done, absl::StrCat("verify ", label));
      status = MeasureVerify(ids, k, histories);
      if (!status.ok()) break;
      ++done;
      if (k == 0) continue;
      for (DrafterUnderTest& d : drafters_) {
        bar.Update(done, absl::StrCat("propose ", d.pool, " ", label));
        status = MeasurePropose(d, ids, k, histories);
        if (!status.ok()) break;
        ++done;
      }
      if (!status.ok()) break;
    }
    // Sessions go whatever happened: a profiler must not leak KV in shared services.
    absl::Status released = verifier_.Release(ids);
    if (!released.ok()) released = Annotate(released, "verifier Release");
    for (DrafterUnderTest& d : drafters_) {
      const absl::Status r = d.client->Release(ids);
      if (released.ok() && !r.ok()) released = Annotate(r, absl::StrCat("drafter ", d.pool, " Release"));
    }
    return status.ok() ? released : status;
  }

  absl::Status MeasureVerify(const std::vector<spec::RequestId>& ids, int32_t k,
                             std::vector<std::vector<int32_t>>& histories) {
    const int32_t vocab = verifier_info_.vocab_size;
    std::vector<double> seconds, contexts;
    for (int32_t rep = 0; rep <= grid_.repeats; ++rep) {
      std::vector<spec::VerifyItem> items;
      double n_context = 0;
      for (size_t i = 0; i < ids.size(); ++i) {
        spec::VerifyItem item;
        item.id = ids[i];
        for (int32_t n = 0; n < k; ++n) {
          item.draft.tokens.push_back(RandomToken(vocab));
          item.draft.parents.push_back(n - 1);
        }
        n_context += static_cast<double>(histories[i].size());
        items.push_back(std::move(item));
      }
      const auto start = Clock::now();
      auto response = verifier_.Verify(items);
      const double wall = SecondsSince(start);
      if (!response.ok()) return Annotate(response.status(), "verifier Verify");
      for (size_t i = 0; i < ids.size() && i < response->results.size(); ++i) {
        const std::vector<int32_t>& tokens = response->results[i].tokens;
        histories[i].insert(histories[i].end(), tokens.begin(), tokens.end());
      }
      if (rep == 0) continue;  // warm-up: first touch of new shapes and fresh sessions
      seconds.push_back(response->compute_seconds);
      contexts.push_back(n_context);
      rpc_overheads_.push_back(std::max(0.0, wall - response->compute_seconds));
    }
    const size_t fastest = static_cast<size_t>(std::min_element(seconds.begin(), seconds.end()) - seconds.begin());
    router::ForwardSample sample;
    sample.n_context = contexts[fastest];
    sample.n_batched = static_cast<double>(ids.size()) * (1 + k);
    sample.seconds = seconds[fastest];
    target_samples_.push_back(sample);
    return absl::OkStatus();
  }

  absl::Status MeasurePropose(DrafterUnderTest& d, const std::vector<spec::RequestId>& ids, int32_t k,
                              const std::vector<std::vector<int32_t>>& histories) {
    std::vector<double> seconds;
    double n_context = 0;
    for (int32_t rep = 0; rep <= grid_.repeats; ++rep) {
      std::vector<spec::ProposeItem> items;
      n_context = 0;
      for (size_t i = 0; i < ids.size(); ++i) {
        spec::ProposeItem item;
        item.id = ids[i];
        // Only the tokens committed since the drafter's last call are sent. Re-sending the
        // same history makes a draft model drop its speculated tail and refeed the pending
        // token, one token per request, as in a steady decoding step.
        item.known_length = static_cast<int32_t>(d.known[i]);
        item.new_tokens.assign(histories[i].begin() + item.known_length, histories[i].end());
        item.shape.depth = k;
        n_context += static_cast<double>(histories[i].size()) + 0.5 * (k - 1);
        items.push_back(std::move(item));
      }
      const auto start = Clock::now();
      auto response = d.client->Propose(items);
      const double wall = SecondsSince(start);
      if (!response.ok()) return Annotate(response.status(), absl::StrCat("drafter ", d.pool, " Propose"));
      for (size_t i = 0; i < ids.size(); ++i) d.known[i] = histories[i].size();
      // The first call of each depth also carries the catch-up on new tokens: warm-up.
      if (rep == 0) continue;
      seconds.push_back(response->compute_seconds);
      d.propose_seconds.push_back(response->compute_seconds);
      rpc_overheads_.push_back(std::max(0.0, wall - response->compute_seconds));
    }
    router::ForwardSample sample;
    sample.n_context = n_context;
    sample.n_batched = static_cast<double>(ids.size());
    sample.seconds = *std::min_element(seconds.begin(), seconds.end()) / k;
    d.samples.push_back(sample);
    return absl::OkStatus();
  }

  int32_t RandomToken(int32_t vocab) {
    return static_cast<int32_t>(rng_.NextU64() % static_cast<uint64_t>(std::max(1, vocab)));
  }

  static absl::Status Annotate(const absl::Status& s, const std::string& call) {
    return absl::Status(s.code(), absl::StrCat(call, ": ", s.message()));
  }

  rpc::VerifierClient& verifier_;
  spec::WorkerInfo verifier_info_;
  std::vector<DrafterUnderTest>& drafters_;
  Grid grid_;
  engine::Rng rng_;
  uint64_t next_id_ = 0;
  std::vector<router::ForwardSample> target_samples_;
  std::vector<double> rpc_overheads_;
  std::vector<std::string> skipped_;
};

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

int RunProfile(const Args& args) {
  const std::string drafter_flag = args.Require("drafter");
  const std::string verifier_address = args.Require("verifier");
  const std::string out_path = args.GetString("out", "latency.json");
  std::vector<DrafterUnderTest> drafters;
  if (!ParseDrafters(drafter_flag, args.GetString("pool", "default"), &drafters)) {
    return Fail("--drafter must be ADDR or NAME=ADDR[,NAME=ADDR...] with distinct names");
  }
  const std::string batch_text = args.GetString("batch-sizes", "1,2,4,8");
  const std::string context_text = args.GetString("contexts", "32,128,384");
  const std::string depth_text = args.GetString("depths", "0,2,4");
  Grid grid;
  if (!ParseList(batch_text, 1, &grid.batch_sizes)) {
    return Fail("--batch-sizes must be a comma-separated list of integers >= 1");
  }
  if (!ParseList(context_text, 1, &grid.contexts)) {
    return Fail("--contexts must be a comma-separated list of integers >= 1");
  }
  if (!ParseList(depth_text, 0, &grid.depths)) {
    return Fail("--depths must be a comma-separated list of integers >= 0");
  }
  grid.repeats = static_cast<int32_t>(args.GetInt("repeats", 5));
  if (grid.repeats < 1) return Fail("--repeats must be >= 1");
  const uint64_t seed = static_cast<uint64_t>(args.GetInt("seed", 1));
  const double wait_seconds = args.GetDouble("wait-seconds", 30);
  const bool verbose = args.Has("verbose");
  args.CheckAllUsed();

  if (absl::Status s = rpc::WaitForHealthy(verifier_address, absl::Seconds(wait_seconds)); !s.ok()) {
    return Fail(absl::StrCat("verifier ", verifier_address, " is not serving: ", s.ToString()));
  }
  rpc::VerifierClient verifier(rpc::MakeChannel(verifier_address));
  auto verifier_info = verifier.GetInfo();
  if (!verifier_info.ok()) return Fail(absl::StrCat("verifier GetInfo: ", verifier_info.status().ToString()));
  const int32_t max_depth = *std::max_element(grid.depths.begin(), grid.depths.end());
  if (max_depth > verifier_info->max_draft_tokens) {
    return Fail(absl::StrCat("--depths: ", max_depth, " is above the verifier's max draft tokens ",
                             verifier_info->max_draft_tokens));
  }
  std::printf("profiling verifier %s (%s): batch sizes %s, contexts %s, depths %s, %d repeats\n",
              verifier_address.c_str(), verifier_info->model_name.c_str(), batch_text.c_str(), context_text.c_str(),
              depth_text.c_str(), grid.repeats);
  for (DrafterUnderTest& d : drafters) {
    if (absl::Status s = rpc::WaitForHealthy(d.address, absl::Seconds(wait_seconds)); !s.ok()) {
      return Fail(absl::StrCat("drafter ", d.address, " is not serving: ", s.ToString()));
    }
    d.client = std::make_unique<rpc::DrafterClient>(rpc::MakeChannel(d.address));
    auto info = d.client->GetInfo();
    if (!info.ok()) return Fail(absl::StrCat("drafter ", d.address, " GetInfo: ", info.status().ToString()));
    d.info = *info;
    if (max_depth > d.info.max_draft_tokens) {
      return Fail(absl::StrCat("--depths: ", max_depth, " is above drafter ", d.pool, "'s max draft tokens ",
                               d.info.max_draft_tokens));
    }
    if (d.info.vocab_size != 0 && d.info.vocab_size != verifier_info->vocab_size) {
      return Fail(absl::StrCat("drafter ", d.pool, " has vocab ", d.info.vocab_size, ", the verifier ",
                               verifier_info->vocab_size));
    }
    std::printf("  drafter pool '%s': %s (%s)\n", d.pool.c_str(), d.address.c_str(),
                d.info.vocab_size == 0 ? "model-free" : d.info.model_name.c_str());
  }
  std::fflush(stdout);

  const auto start = Clock::now();
  Profiler profiler(verifier, *verifier_info, drafters, grid, seed);
  if (absl::Status s = profiler.Run(); !s.ok()) return Fail(s.ToString());
  for (const std::string& cell : profiler.skipped()) {
    std::printf("skipped %s: does not fit a worker's free KV blocks\n", cell.c_str());
  }
  if (verbose) {
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

  bool constrained = false;
  size_t discarded = 0;
  auto target_fit = FitRobust(profiler.target_samples(), &constrained, &discarded);
  if (!target_fit.ok()) return Fail(absl::StrCat("target fit: ", target_fit.status().ToString()));
  // Start from a model with no drafters (the default constructor carries the A100 ones).
  auto model = router::LatencyModel::FromJson({{"target", {{"alpha", 0}, {"gamma", 0}, {"delta", 0}}}});
  if (!model.ok()) return Fail(model.status().ToString());
  model->set_target(target_fit->coefficients);
  nlohmann::json fit_info;
  fit_info["target"] = FitJson(*target_fit, profiler.target_samples().size(), constrained, discarded);
  PrintFit("target", *target_fit, profiler.target_samples().size(), constrained, discarded);
  fit_info["drafters"] = nlohmann::json::object();
  for (const DrafterUnderTest& d : drafters) {
    router::DrafterCost cost;
    if (d.info.vocab_size == 0) {
      cost.model_free = true;
      cost.constant_seconds = Median(d.propose_seconds);
      fit_info["drafters"][d.pool] = {{"kind", "model_free"}, {"samples", d.propose_seconds.size()}};
      std::printf("%-8s model-free: %.1f us per Propose (median of %zu)\n", d.pool.c_str(),
                  1e6 * cost.constant_seconds, d.propose_seconds.size());
    } else {
      auto draft_fit = FitRobust(d.samples, &constrained, &discarded);
      if (!draft_fit.ok()) return Fail(absl::StrCat("drafter ", d.pool, " fit: ", draft_fit.status().ToString()));
      cost.forward = draft_fit->coefficients;
      fit_info["drafters"][d.pool] = FitJson(*draft_fit, d.samples.size(), constrained, discarded);
      PrintFit(d.pool.c_str(), *draft_fit, d.samples.size(), constrained, discarded);
    }
    model->set_drafter(d.pool, cost);
  }
  const double rpc_p50 = Median(profiler.rpc_overheads());
  const double rpc_p99 = Quantile(profiler.rpc_overheads(), 0.99);
  std::printf("rpc overhead (wall - compute) per call: p50 %.0f us, p99 %.0f us (%zu calls)\n", 1e6 * rpc_p50,
              1e6 * rpc_p99, profiler.rpc_overheads().size());
  model->set_rpc_seconds(rpc_p50);
  std::string names;
  for (const DrafterUnderTest& d : drafters) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", d.pool, " = ",
                    d.info.vocab_size == 0 ? std::string("model-free") : d.info.model_name);
  }
  model->set_description(absl::StrCat("profiled by `splitspec profile`: target ", verifier_info->model_name,
                                      "; drafters ", names, "; target fit R^2 ",
                                      absl::StrFormat("%.4f", target_fit->r2)));

  nlohmann::json out = model->ToJson();
  fit_info["rpc_overhead_p99_seconds"] = rpc_p99;
  fit_info["grid"] = {{"batch_sizes", grid.batch_sizes},
                      {"contexts", grid.contexts},
                      {"depths", grid.depths},
                      {"repeats", grid.repeats}};
  fit_info["seconds"] = SecondsSince(start);
  out["fit"] = fit_info;
  // Refuse to write what the router would refuse to read.
  if (auto check = router::LatencyModel::FromJson(out); !check.ok()) {
    return Fail(absl::StrCat("internal: the fitted model does not load: ", check.status().ToString()));
  }
  std::ofstream file(out_path);
  file << out.dump(2) << "\n";
  file.close();
  if (!file) return Fail(absl::StrCat("cannot write ", out_path));
  std::printf("wrote %s (%.1f s)\n", out_path.c_str(), SecondsSince(start));
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
