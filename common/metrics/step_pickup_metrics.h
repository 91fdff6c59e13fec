// How a process's step socket frames were waited for (common/rpc/frame_pickup.h): a histogram of
// the time from a frame's publishing to its reading, by the call's method and how its reader
// was waiting. The router exports its answers' (splitspec_step_answer_pickup_seconds), each
// worker its requests' (splitspec_step_request_pickup_seconds).
//
// Thread-safe: Observe may be called from any thread (the series are made up front).
#ifndef SPLITSPEC_COMMON_METRICS_STEP_PICKUP_METRICS_H_
#define SPLITSPEC_COMMON_METRICS_STEP_PICKUP_METRICS_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics/metrics_registry.h"

namespace splitspec::metrics {

// The label values, as common/rpc/frame_pickup.h names them.
inline constexpr std::string_view kPickupMethods[] = {"verify", "propose", "other"};
inline constexpr std::string_view kPickupWaits[] = {"ready", "spinning", "asleep_before_window",
                                                    "asleep_after_window"};

class StepPickupMetrics {
 public:
  enum class Frames { kAnswers, kRequests };

  static absl::StatusOr<std::unique_ptr<StepPickupMetrics>> Create(MetricsRegistry& registry, Frames frames);

  // One frame read `seconds` after it was published. A method or wait outside the lists above
  // counts as "other" / is dropped.
  void Observe(std::string_view method, std::string_view wait, double seconds);

 private:
  StepPickupMetrics() = default;
  // [method][wait], in the order of the lists above.
  std::vector<std::vector<prometheus::Histogram*>> series_;
};

}  // namespace splitspec::metrics

#endif  // SPLITSPEC_COMMON_METRICS_STEP_PICKUP_METRICS_H_
