// StepPickupMetrics: the series, made up front, and their updates.
#include "common/metrics/step_pickup_metrics.h"

#include <string>

#include "absl/time/time.h"
#include "common/metrics/assign_or_return.h"
#include "common/metrics/buckets.h"

namespace splitspec::metrics {
namespace {

// A method's row of series, and one method of each row (for its label).
int MethodIndex(rpc::StepMethod method) {
  switch (method) {
    case rpc::StepMethod::kVerify:
    case rpc::StepMethod::kVerifyCompact: return 0;
    case rpc::StepMethod::kPropose:
    case rpc::StepMethod::kProposeCompact: return 1;
    default: return 2;
  }
}
constexpr rpc::StepMethod kMethodOfRow[] = {rpc::StepMethod::kVerify, rpc::StepMethod::kPropose,
                                            rpc::StepMethod::kRelease};

}  // namespace

absl::StatusOr<std::unique_ptr<StepPickupMetrics>> StepPickupMetrics::Create(MetricsRegistry& registry,
                                                                              Frames frames) {
  const bool answers = frames == Frames::kAnswers;
  prometheus::Family<prometheus::Histogram>* family = nullptr;
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
      family, registry.HistogramFamily(
                  answers ? "splitspec_step_answer_pickup_seconds" : "splitspec_step_request_pickup_seconds",
                  answers ? "Time from a worker's publishing a step socket answer to the router's reading it, by "
                            "method and how the router was waiting (spinning in its window, or asleep)."
                          : "Time from the router's publishing a step socket request to this worker's reading it, "
                            "by method and how the worker was waiting (spinning in its window, or asleep)."));
  std::unique_ptr<StepPickupMetrics> m(new StepPickupMetrics());
  for (int row = 0; row < kNumMethods; ++row) {
    const rpc::StepMethod method = kMethodOfRow[row];
    for (int w = 0; w < rpc::FramePickup::kNumWaits; ++w) {
      const prometheus::Labels labels = {{"method", std::string(rpc::PickupMethodName(method))},
                                         {"wait", std::string(rpc::WaitName(static_cast<rpc::FramePickup::Wait>(w)))}};
      SPLITSPEC_METRICS_ASSIGN_OR_RETURN(m->series_[MethodIndex(method)][w],
                                         MetricsRegistry::AddHistogram(*family, labels, FramePickupBuckets()));
    }
  }
  return m;
}

void StepPickupMetrics::Observe(rpc::StepMethod method, const rpc::FramePickup& pickup) {
  series_[MethodIndex(method)][static_cast<int>(pickup.wait)]->Observe(absl::ToDoubleSeconds(pickup.latency));
}

rpc::PickupObserver StepPickupMetrics::Observer() {
  return [this](rpc::StepMethod method, const rpc::FramePickup& pickup) { Observe(method, pickup); };
}

}  // namespace splitspec::metrics
