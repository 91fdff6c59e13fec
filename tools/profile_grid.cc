// Grid measurements of `splitspec profile` (see profile_grid.h).
#include "tools/profile_grid.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"

namespace splitspec::tools {
namespace {

using Clock = std::chrono::steady_clock;

// Session ids far from the router's own (which count up from 1), in case the services are
// shared with a running router.
constexpr spec::RequestId kFirstSessionId = 0x7072'6f66'0000'0000ULL;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::Status Annotate(const absl::Status& s, const std::string& call) {
  return absl::Status(s.code(), absl::StrCat(call, ": ", s.message()));
}

}  // namespace

// Progress on stderr, redrawn in place: [#####.....] done/total what.
class ProfileProgressBar {
 public:
  explicit ProfileProgressBar(int total) : total_(std::max(1, total)) {}
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

Profiler::Profiler(rpc::VerifierClient& verifier, const spec::WorkerInfo& verifier_info,
                   std::vector<DrafterUnderTest>& drafters, const Grid& grid, uint64_t seed)
    : verifier_(verifier), verifier_info_(verifier_info), drafters_(drafters), grid_(grid), rng_(seed) {}

int Profiler::StepsPerCell() const {
  int steps = 0;
  for (int32_t k : grid_.depths) steps += 1 + (k > 0 ? static_cast<int>(drafters_.size()) : 0);
  return steps;
}

int Profiler::Steps() const {
  return static_cast<int>(grid_.batch_sizes.size() * grid_.contexts.size()) * StepsPerCell();
}

absl::Status Profiler::Run() {
  ProfileProgressBar bar(Steps());
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

bool Profiler::Fits(const spec::WorkerInfo& info, int32_t batch, int64_t per_request) {
  if (info.total_blocks <= 0) return true;  // stateless (n-gram)
  const int64_t block = std::max(1, info.block_size);
  const int64_t blocks = static_cast<int64_t>(batch) * ((per_request + block - 1) / block);
  return blocks <= info.free_blocks;
}

// One (batch, context) cell; for each depth a warm-up step and `repeats` measured steps on
// each service, the fastest repeat being the grid sample.
absl::Status Profiler::RunCell(int32_t batch, int32_t context, ProfileProgressBar& bar, int& done) {
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

absl::Status Profiler::MeasureVerify(const std::vector<spec::RequestId>& ids, int32_t k,
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

absl::Status Profiler::MeasurePropose(DrafterUnderTest& d, const std::vector<spec::RequestId>& ids, int32_t k,
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

int32_t Profiler::RandomToken(int32_t vocab) {
  return static_cast<int32_t>(rng_.NextU64() % static_cast<uint64_t>(std::max(1, vocab)));
}

}  // namespace splitspec::tools
