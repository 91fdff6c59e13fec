// How a process's step socket frames were waited for (common/rpc/frame_pickup.h): a histogram of
// the time from a frame's publishing to its reading, by the call's method and how its reader
// was waiting. The router exports its answers' (splitspec_step_answer_pickup_seconds), each
// worker its requests' (splitspec_step_request_pickup_seconds).
//
// Thread-safe: Observe may be called from any thread (the series are made up front).
#ifndef SPLITSPEC_COMMON_METRICS_STEP_PICKUP_METRICS_H_
#define SPLITSPEC_COMMON_METRICS_STEP_PICKUP_METRICS_H_

#include <array>
#include <memory>

#include "absl/status/statusor.h"
#include "common/metrics/metrics_registry.h"
#include "common/rpc/frame_pickup.h"

namespace splitspec::metrics {

class StepPickupMetrics {
 public:
  enum class Frames { kAnswers, kRequests };

  static absl::StatusOr<std::unique_ptr<StepPickupMetrics>> Create(MetricsRegistry& registry, Frames frames);

  // One frame of a `method` call, waited for as `pickup` says. Methods other than Verify and
  // Propose (in either form) count as "other".
  void Observe(rpc::StepMethod method, const rpc::FramePickup& pickup);
  // Observe, as the step sockets' observer (this must outlive the sockets that call it).
  rpc::PickupObserver Observer();

 private:
  static constexpr int kNumMethods = 3;  // verify, propose, other: rpc::PickupMethodName's labels

  StepPickupMetrics() = default;
  std::array<std::array<prometheus::Histogram*, rpc::FramePickup::kNumWaits>, kNumMethods> series_{};
};

}  // namespace splitspec::metrics

#endif  // SPLITSPEC_COMMON_METRICS_STEP_PICKUP_METRICS_H_
