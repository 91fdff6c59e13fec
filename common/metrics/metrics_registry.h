// MetricsRegistry: the one Prometheus registry of a process, wrapped so that creating metrics
// reports errors as absl::Status (prometheus-cpp throws) and so that the text exposition is
// deterministic (families sorted by name, series sorted by labels) for diffing and tests.
//
// Thread safety: all methods are safe to call concurrently. Metric handles returned by the Add*
// methods stay valid for the registry's lifetime and are themselves thread-safe.
#ifndef SPLITSPEC_COMMON_METRICS_METRICS_REGISTRY_H_
#define SPLITSPEC_COMMON_METRICS_METRICS_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/labels.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace splitspec::metrics {

// Every metric the project exports starts with this prefix (Prometheus naming practice: one
// application prefix).
inline constexpr char kMetricPrefix[] = "splitspec_";

// The content type of the Prometheus text exposition format served on /metrics.
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4";

class MetricsRegistry {
 public:
  MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Returns the family `name`, creating it on first use (two metric sets may share a family,
  // e.g. one RouterSpecMetrics per drafter pool). Errors: a name without the splitspec_ prefix,
  // an invalid Prometheus name, or a name already used by a family of another type.
  absl::StatusOr<prometheus::Family<prometheus::Counter>*> CounterFamily(const std::string& name,
                                                                         const std::string& help);
  absl::StatusOr<prometheus::Family<prometheus::Gauge>*> GaugeFamily(const std::string& name,
                                                                     const std::string& help);
  absl::StatusOr<prometheus::Family<prometheus::Histogram>*> HistogramFamily(
      const std::string& name, const std::string& help);

  // Returns the series of `family` with `labels`, creating it if needed. Errors: invalid or
  // reserved label names. Adding the same labels twice returns the same handle.
  static absl::StatusOr<prometheus::Counter*> AddCounter(
      prometheus::Family<prometheus::Counter>& family, const prometheus::Labels& labels);
  static absl::StatusOr<prometheus::Gauge*> AddGauge(prometheus::Family<prometheus::Gauge>& family,
                                                     const prometheus::Labels& labels);
  // `bounds` must be strictly increasing and finite (+Inf is implicit).
  static absl::StatusOr<prometheus::Histogram*> AddHistogram(
      prometheus::Family<prometheus::Histogram>& family, const prometheus::Labels& labels,
      const std::vector<double>& bounds);

  // Snapshot of every family, sorted (families by name, series by label values; label values
  // that are integers compare numerically so position="10" follows position="9").
  std::vector<prometheus::MetricFamily> Collect() const;

  // The Prometheus text exposition (format 0.0.4) of Collect().
  std::string Serialize() const;

  prometheus::Registry& registry() { return *registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

}  // namespace splitspec::metrics

#endif  // SPLITSPEC_COMMON_METRICS_METRICS_REGISTRY_H_
