// StepPickupMetrics: the series, made up front, and their updates.
#include "common/metrics/step_pickup_metrics.h"

#include <iterator>

#include "common/metrics/assign_or_return.h"
#include "common/metrics/buckets.h"

namespace splitspec::metrics {
namespace {

// The index of `value` in `list`, or -1.
template <size_t N>
int IndexOf(const std::string_view (&list)[N], std::string_view value) {
  for (size_t i = 0; i < N; ++i) {
    if (list[i] == value) return static_cast<int>(i);
  }
  return -1;
}

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
  for (std::string_view method : kPickupMethods) {
    std::vector<prometheus::Histogram*>& row = m->series_.emplace_back();
    for (std::string_view wait : kPickupWaits) {
      prometheus::Histogram* h = nullptr;
      SPLITSPEC_METRICS_ASSIGN_OR_RETURN(
          h, MetricsRegistry::AddHistogram(*family, {{"method", std::string(method)}, {"wait", std::string(wait)}},
                                           FramePickupBuckets()));
      row.push_back(h);
    }
  }
  return m;
}

void StepPickupMetrics::Observe(std::string_view method, std::string_view wait, double seconds) {
  int m = IndexOf(kPickupMethods, method);
  if (m < 0) m = static_cast<int>(std::size(kPickupMethods)) - 1;
  const int w = IndexOf(kPickupWaits, wait);
  if (w < 0) return;
  series_[m][w]->Observe(seconds);
}

}  // namespace splitspec::metrics
