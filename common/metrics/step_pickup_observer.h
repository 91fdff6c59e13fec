// The step socket's pickup observer (common/rpc/frame_pickup.h) that records into
// StepPickupMetrics: what the services hand their step socket clients and servers.
#ifndef SPLITSPEC_COMMON_METRICS_STEP_PICKUP_OBSERVER_H_
#define SPLITSPEC_COMMON_METRICS_STEP_PICKUP_OBSERVER_H_

#include "absl/time/time.h"
#include "common/metrics/step_pickup_metrics.h"
#include "common/rpc/frame_pickup.h"

namespace splitspec::metrics {

// `metrics` (not owned) must outlive the observer's users; null: no observer.
inline rpc::PickupObserver RecordPickupsIn(StepPickupMetrics* metrics) {
  if (metrics == nullptr) return nullptr;
  return [metrics](rpc::StepMethod method, const rpc::FramePickup& pickup) {
    metrics->Observe(rpc::PickupMethodName(method), rpc::WaitName(pickup.wait),
                     absl::ToDoubleSeconds(pickup.latency));
  };
}

}  // namespace splitspec::metrics

#endif  // SPLITSPEC_COMMON_METRICS_STEP_PICKUP_OBSERVER_H_
