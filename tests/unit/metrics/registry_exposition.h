// What the metrics tests read from a registry: its exposition parsed (a parse failure is a test
// failure) and the cumulative count of one histogram bucket.
#ifndef SPLITSPEC_TESTS_UNIT_METRICS_REGISTRY_EXPOSITION_H_
#define SPLITSPEC_TESTS_UNIT_METRICS_REGISTRY_EXPOSITION_H_

#include <map>
#include <optional>
#include <string>

#include "common/metrics/metrics_registry.h"
#include "gtest/gtest.h"
#include "tests/unit/metrics/exposition_parser.h"

namespace splitspec::metrics::testing {

// `registry`'s exposition; an empty one (and a failed expectation) when it does not parse.
inline Exposition Parse(const MetricsRegistry& registry) {
  absl::StatusOr<Exposition> parsed = ParseExposition(registry.Serialize());
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : Exposition{};
}

// Cumulative count of histogram `name`'s bucket bounded by `le`, in the series with `labels`;
// nullopt when there is no such bucket. Bounds compare as numbers ("0.01" is 0.010).
inline std::optional<double> Bucket(const Exposition& e, const std::string& name,
                                    const std::map<std::string, std::string>& labels, double le) {
  for (const Sample& sample : e.Find(name + "_bucket", labels)) {
    for (const auto& [key, value] : sample.labels) {
      if (key == "le" && value != "+Inf" && std::stod(value) == le) return sample.value;
    }
  }
  return std::nullopt;
}

// The same with the bound as Prometheus writes it: a number, or "+Inf" for the last bucket.
inline std::optional<double> Bucket(const Exposition& e, const std::string& name,
                                    const std::map<std::string, std::string>& labels,
                                    const std::string& le) {
  if (le != "+Inf") return Bucket(e, name, labels, std::stod(le));
  for (const Sample& sample : e.Find(name + "_bucket", labels)) {
    for (const auto& [key, value] : sample.labels) {
      if (key == "le" && value == "+Inf") return sample.value;
    }
  }
  return std::nullopt;
}

}  // namespace splitspec::metrics::testing

#endif  // SPLITSPEC_TESTS_UNIT_METRICS_REGISTRY_EXPOSITION_H_
