// MetricsRegistry: error mapping around prometheus-cpp and the sorted text exposition.
#include "common/metrics/metrics_registry.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace splitspec::metrics {
namespace {

absl::Status CheckPrefix(const std::string& name) {
  if (!absl::StartsWith(name, kMetricPrefix) || name.size() == sizeof(kMetricPrefix) - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric name '", name, "' must start with '", kMetricPrefix, "'"));
  }
  return absl::OkStatus();
}

// prometheus-cpp reports bad names and type clashes by throwing; callers get a Status instead.
template <typename Builder>
auto RegisterFamily(Builder builder, const std::string& name, const std::string& help,
                    prometheus::Registry& registry)
    -> absl::StatusOr<decltype(&builder.Register(registry))> {
  if (absl::Status status = CheckPrefix(name); !status.ok()) return status;
  try {
    return &builder.Name(name).Help(help).Register(registry);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot register metric family '", name, "': ", e.what()));
  }
}

template <typename T, typename... Args>
absl::StatusOr<T*> AddSeries(prometheus::Family<T>& family, const prometheus::Labels& labels,
                             Args&&... args) {
  try {
    return &family.Add(labels, std::forward<Args>(args)...);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot add series to '", family.GetName(), "': ", e.what()));
  }
}

// Orders label values so that integers sort numerically ("2" < "10") and other strings
// lexicographically; integers come before non-integers.
bool LabelValueLess(const std::string& a, const std::string& b) {
  int64_t ia = 0;
  int64_t ib = 0;
  const bool a_int = absl::SimpleAtoi(a, &ia);
  const bool b_int = absl::SimpleAtoi(b, &ib);
  if (a_int && b_int) return ia < ib || (ia == ib && a < b);
  if (a_int != b_int) return a_int;
  return a < b;
}

bool SeriesLess(const prometheus::ClientMetric& a, const prometheus::ClientMetric& b) {
  const size_t n = std::min(a.label.size(), b.label.size());
  for (size_t i = 0; i < n; ++i) {
    if (a.label[i].name != b.label[i].name) return a.label[i].name < b.label[i].name;
    if (a.label[i].value != b.label[i].value) {
      return LabelValueLess(a.label[i].value, b.label[i].value);
    }
  }
  return a.label.size() < b.label.size();
}

}  // namespace

MetricsRegistry::MetricsRegistry()
    : registry_(
          std::make_shared<prometheus::Registry>(prometheus::Registry::InsertBehavior::Merge)) {}

absl::StatusOr<prometheus::Family<prometheus::Counter>*> MetricsRegistry::CounterFamily(
    const std::string& name, const std::string& help) {
  return RegisterFamily(prometheus::BuildCounter(), name, help, *registry_);
}

absl::StatusOr<prometheus::Family<prometheus::Gauge>*> MetricsRegistry::GaugeFamily(
    const std::string& name, const std::string& help) {
  return RegisterFamily(prometheus::BuildGauge(), name, help, *registry_);
}

absl::StatusOr<prometheus::Family<prometheus::Histogram>*> MetricsRegistry::HistogramFamily(
    const std::string& name, const std::string& help) {
  return RegisterFamily(prometheus::BuildHistogram(), name, help, *registry_);
}

absl::StatusOr<prometheus::Counter*> MetricsRegistry::AddCounter(
    prometheus::Family<prometheus::Counter>& family, const prometheus::Labels& labels) {
  return AddSeries(family, labels);
}

absl::StatusOr<prometheus::Gauge*> MetricsRegistry::AddGauge(
    prometheus::Family<prometheus::Gauge>& family, const prometheus::Labels& labels) {
  return AddSeries(family, labels);
}

absl::StatusOr<prometheus::Histogram*> MetricsRegistry::AddHistogram(
    prometheus::Family<prometheus::Histogram>& family, const prometheus::Labels& labels,
    const std::vector<double>& bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i]))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram '", family.GetName(), "': bucket bounds must be finite and increasing"));
    }
  }
  return AddSeries(family, labels, bounds);
}

std::vector<prometheus::MetricFamily> MetricsRegistry::Collect() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::sort(families.begin(), families.end(),
            [](const prometheus::MetricFamily& a, const prometheus::MetricFamily& b) {
              return a.name < b.name;
            });
  for (prometheus::MetricFamily& family : families) {
    std::stable_sort(family.metric.begin(), family.metric.end(), SeriesLess);
  }
  return families;
}

std::string MetricsRegistry::Serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, Collect());
  return out.str();
}

}  // namespace splitspec::metrics
