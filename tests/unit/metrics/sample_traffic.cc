// Synthetic traffic for the metric sets.
#include "tests/unit/metrics/sample_traffic.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace splitspec::metrics::testing {

absl::StatusOr<RouterSets> CreateRouterSets(MetricsRegistry& registry) {
  RouterSets sets;
  RouterSpecMetricsOptions a;
  a.pool = "draft-model";
  a.policy = "smartspec";
  a.max_k = 4;
  absl::StatusOr<std::unique_ptr<RouterSpecMetrics>> spec_a =
      RouterSpecMetrics::Create(registry, a);
  if (!spec_a.ok()) return spec_a.status();
  RouterSpecMetricsOptions b;
  b.pool = "ngram";
  b.policy = "fsm";
  b.max_k = 6;
  absl::StatusOr<std::unique_ptr<RouterSpecMetrics>> spec_b =
      RouterSpecMetrics::Create(registry, b);
  if (!spec_b.ok()) return spec_b.status();
  absl::StatusOr<std::unique_ptr<RouterServingMetrics>> serving =
      RouterServingMetrics::Create(registry);
  if (!serving.ok()) return serving.status();
  sets.spec_draft_model = *std::move(spec_a);
  sets.spec_ngram = *std::move(spec_b);
  sets.serving = *std::move(serving);
  return sets;
}

void FeedRouterSteps(RouterSets& sets, int n_steps, std::mt19937& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<ProposalOutcome> outcomes;
  std::vector<TokenEmission> emissions;
  for (int step = 0; step < n_steps; ++step) {
    for (RouterSpecMetrics* spec : {sets.spec_draft_model.get(), sets.spec_ngram.get()}) {
      const int batch = 1 + static_cast<int>(unit(rng) * 16);
      const double accept_rate = 0.5 + 0.4 * unit(rng);
      outcomes.clear();
      emissions.clear();
      for (int r = 0; r < batch; ++r) {
        ProposalOutcome o;
        o.proposed = static_cast<int>(unit(rng) * (spec->max_k() + 1));
        while (o.accepted < o.proposed && unit(rng) < accept_rate) ++o.accepted;
        outcomes.push_back(o);
        TokenEmission e;
        e.n_tokens = o.proposed > 0 ? o.accepted + 1 : 1;
        e.interval_seconds = 0.01 + 0.02 * unit(rng);
        emissions.push_back(e);
      }
      spec->RecordStep(outcomes);
      if (spec == sets.spec_ngram.get()) spec->SetActiveTier(1 + static_cast<int>(unit(rng) * 3));
      spec->SetGoodput(800 + 200 * unit(rng), 700 + 250 * unit(rng));
      StepStageSeconds stages;
      stages.schedule = 0.0002 + 0.0001 * unit(rng);
      stages.draft = 0.002 + 0.002 * unit(rng);
      stages.verify = 0.006 + 0.004 * unit(rng);
      stages.rpc_overhead = 0.0005 + 0.0005 * unit(rng);
      stages.router = 0.00005 + 0.00005 * unit(rng);
      sets.serving->RecordStep(stages, emissions);
    }
    sets.serving->SetLoad(static_cast<int64_t>(unit(rng) * 10),
                          static_cast<int64_t>(unit(rng) * 32));
    if (step % 4 == 0) {
      sets.serving->RecordAdmitted(0.05 * unit(rng), 20 + static_cast<int64_t>(unit(rng) * 200));
      sets.serving->RecordFirstToken(0.02 + 0.1 * unit(rng));
    }
    if (step % 4 == 3) {
      const double u = unit(rng);
      const RequestStatus status = u < 0.7    ? RequestStatus::kStop
                                   : u < 0.9  ? RequestStatus::kLength
                                   : u < 0.97 ? RequestStatus::kCancelled
                                              : RequestStatus::kError;
      sets.serving->RecordFinished(status, 0.5 + 3.0 * unit(rng));
    }
  }
}

void FeedWorkerSteps(WorkerMetrics& worker, WorkerRole role, int n_steps, std::mt19937& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int64_t total_blocks = 4096;
  for (int step = 0; step < n_steps; ++step) {
    const int64_t batch = 1 + static_cast<int64_t>(unit(rng) * 32);
    if (step % 8 == 0) worker.RecordForward(ForwardKind::kPrefill, 0.02 * unit(rng), 1, 128);
    if (role == WorkerRole::kDrafter) {
      worker.RecordForward(ForwardKind::kDraftStep, 0.001 + 0.001 * unit(rng), batch, batch);
    } else {
      worker.RecordForward(ForwardKind::kVerify, 0.006 + 0.004 * unit(rng), batch, batch * 4);
    }
    const int64_t used = static_cast<int64_t>(unit(rng) * total_blocks);
    worker.SetKvBlocks(used, total_blocks - used);
    worker.SetLiveSessions(batch);
    if (unit(rng) < 0.05) worker.RecordRpcError(absl::StatusCode::kUnavailable);
  }
}

absl::StatusOr<AllSets> CreateAndFeedAll(MetricsRegistry& registry, int n_steps, uint32_t seed) {
  AllSets all;
  absl::StatusOr<RouterSets> router = CreateRouterSets(registry);
  if (!router.ok()) return router.status();
  all.router = *std::move(router);
  absl::StatusOr<std::unique_ptr<WorkerMetrics>> drafter =
      WorkerMetrics::Create(registry, WorkerRole::kDrafter);
  if (!drafter.ok()) return drafter.status();
  absl::StatusOr<std::unique_ptr<WorkerMetrics>> verifier =
      WorkerMetrics::Create(registry, WorkerRole::kVerifier);
  if (!verifier.ok()) return verifier.status();
  all.drafter = *std::move(drafter);
  all.verifier = *std::move(verifier);
  std::mt19937 rng(seed);
  FeedRouterSteps(all.router, n_steps, rng);
  FeedWorkerSteps(*all.drafter, WorkerRole::kDrafter, n_steps, rng);
  FeedWorkerSteps(*all.verifier, WorkerRole::kVerifier, n_steps, rng);
  for (auto [pickups, frames] : {std::pair{&all.answer_pickups, StepPickupMetrics::Frames::kAnswers},
                                 std::pair{&all.request_pickups, StepPickupMetrics::Frames::kRequests}}) {
    absl::StatusOr<std::unique_ptr<StepPickupMetrics>> created = StepPickupMetrics::Create(registry, frames);
    if (!created.ok()) return created.status();
    *pickups = *std::move(created);
    std::uniform_real_distribution<double> spinning(2e-6, 2e-5), asleep(5e-5, 3e-4);
    using rpc::FramePickup;
    for (int i = 0; i < n_steps; ++i) {
      (*pickups)->Observe(rpc::StepMethod::kVerifyCompact,
                          FramePickup{FramePickup::Wait::kSpinning, absl::Seconds(spinning(rng))});
      (*pickups)->Observe(rpc::StepMethod::kProposeCompact,
                          i % 5 == 0 ? FramePickup{FramePickup::Wait::kAsleepBeforeWindow, absl::Seconds(asleep(rng))}
                                     : FramePickup{FramePickup::Wait::kSpinning, absl::Seconds(spinning(rng))});
    }
  }
  return all;
}

}  // namespace splitspec::metrics::testing
