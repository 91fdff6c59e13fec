// Text exposition produced by MetricsRegistry: escaping, histogram layout, ordering, errors.
#include <cmath>
#include <string>

#include "common/metrics/metrics_registry.h"
#include "gtest/gtest.h"
#include "tests/unit/metrics/registry_exposition.h"

namespace splitspec::metrics {
namespace {

using testing::Exposition;
using testing::Parse;
using testing::ParseExposition;

TEST(ExpositionTest, LabelValuesEscapeBackslashQuoteAndNewline) {
  MetricsRegistry registry;
  auto family = registry.CounterFamily("splitspec_escape_test_total", "Escaping check.");
  ASSERT_TRUE(family.ok()) << family.status();
  const std::string tricky = "a\\b\"c\nd";
  auto counter = MetricsRegistry::AddCounter(**family, {{"pool", tricky}});
  ASSERT_TRUE(counter.ok()) << counter.status();
  (*counter)->Increment(3);

  const std::string text = registry.Serialize();
  // The raw line, escaped by hand from the format's rules: \ -> \\, " -> \", newline -> \n.
  EXPECT_NE(text.find(R"(splitspec_escape_test_total{pool="a\\b\"c\nd"} 3)"), std::string::npos)
      << text;
  // And a scraper reads the original value back.
  Exposition parsed = Parse(registry);
  EXPECT_EQ(parsed.Value("splitspec_escape_test_total", {{"pool", tricky}}), 3.0);
}

TEST(ExpositionTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  MetricsRegistry registry;
  auto family = registry.HistogramFamily("splitspec_hist_test_seconds", "Histogram check.");
  ASSERT_TRUE(family.ok());
  auto hist = MetricsRegistry::AddHistogram(**family, {}, {1.0, 2.0, 4.0});
  ASSERT_TRUE(hist.ok()) << hist.status();
  // 1.0 sits on a bound: "le" buckets include their upper bound.
  for (double v : {0.5, 1.0, 1.5, 3.0, 10.0}) (*hist)->Observe(v);

  Exposition parsed = Parse(registry);
  EXPECT_EQ(parsed.types["splitspec_hist_test_seconds"], "histogram");
  const auto buckets = parsed.Find("splitspec_hist_test_seconds_bucket");
  ASSERT_EQ(buckets.size(), 4u);
  const double expected_le[] = {1.0, 2.0, 4.0, HUGE_VAL};
  const double expected_count[] = {2, 3, 4, 5};
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(buckets[i].labels.size(), 1u);
    EXPECT_EQ(buckets[i].labels[0].first, "le");
    EXPECT_EQ(std::strtod(buckets[i].labels[0].second.c_str(), nullptr), expected_le[i]);
    EXPECT_EQ(buckets[i].value, expected_count[i]) << "bucket " << i;
  }
  EXPECT_EQ(buckets[3].labels[0].second, "+Inf");
  EXPECT_EQ(parsed.Value("splitspec_hist_test_seconds_sum"), 16.0);
  EXPECT_EQ(parsed.Value("splitspec_hist_test_seconds_count"), 5.0);
}

TEST(ExpositionTest, LabelsAndSeriesComeOutInStableOrder) {
  MetricsRegistry registry;
  auto family = registry.CounterFamily("splitspec_order_test_total", "Order check.");
  ASSERT_TRUE(family.ok());
  // Insert positions out of order and with label keys given in reverse order.
  for (int p : {10, 2, 0, 11, 1, 9}) {
    auto c =
        MetricsRegistry::AddCounter(**family, {{"position", std::to_string(p)}, {"a_pool", "x"}});
    ASSERT_TRUE(c.ok());
    (*c)->Increment(p);
  }
  auto other = registry.GaugeFamily("splitspec_aaa_gauge", "Sorted before the counter.");
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(MetricsRegistry::AddGauge(**other, {}).ok());

  const std::string first = registry.Serialize();
  EXPECT_EQ(first, registry.Serialize());
  EXPECT_LT(first.find("splitspec_aaa_gauge"), first.find("splitspec_order_test_total"));

  Exposition parsed = Parse(registry);
  const auto series = parsed.Find("splitspec_order_test_total");
  ASSERT_EQ(series.size(), 6u);
  const char* expected_positions[] = {"0", "1", "2", "9", "10", "11"};
  for (size_t i = 0; i < series.size(); ++i) {
    ASSERT_EQ(series[i].labels.size(), 2u);
    EXPECT_EQ(series[i].labels[0].first, "a_pool");  // label keys sorted
    EXPECT_EQ(series[i].labels[1].first, "position");
    EXPECT_EQ(series[i].labels[1].second, expected_positions[i]);
    EXPECT_EQ(series[i].value, std::stod(expected_positions[i]));
  }
}

TEST(ExpositionTest, HelpAndTypeLinesDescribeEachFamily) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry.CounterFamily("splitspec_c_total", "A counter.").ok());
  ASSERT_TRUE(registry.GaugeFamily("splitspec_g", "A gauge.").ok());
  auto c = registry.CounterFamily("splitspec_c_total", "A counter.");
  ASSERT_TRUE(MetricsRegistry::AddCounter(**c, {}).ok());
  auto g = registry.GaugeFamily("splitspec_g", "A gauge.");
  ASSERT_TRUE(MetricsRegistry::AddGauge(**g, {}).ok());
  Exposition parsed = Parse(registry);
  EXPECT_EQ(parsed.types["splitspec_c_total"], "counter");
  EXPECT_EQ(parsed.types["splitspec_g"], "gauge");
  EXPECT_EQ(parsed.helps["splitspec_c_total"], "A counter.");
  EXPECT_EQ(parsed.helps["splitspec_g"], "A gauge.");
}

TEST(MetricsRegistryTest, SameFamilyNameReturnsSameFamily) {
  MetricsRegistry registry;
  auto a = registry.CounterFamily("splitspec_shared_total", "Shared.");
  auto b = registry.CounterFamily("splitspec_shared_total", "Shared.");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  auto c1 = MetricsRegistry::AddCounter(**a, {{"pool", "p"}});
  auto c2 = MetricsRegistry::AddCounter(**b, {{"pool", "p"}});
  ASSERT_TRUE(c1.ok() && c2.ok());
  EXPECT_EQ(*c1, *c2);
}

TEST(MetricsRegistryTest, RejectsBadNamesTypeClashesAndBuckets) {
  MetricsRegistry registry;
  EXPECT_EQ(registry.CounterFamily("requests_total", "No prefix.").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.CounterFamily("splitspec_", "Prefix only.").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(registry.CounterFamily("splitspec_bad-name_total", "Dash.").ok());
  ASSERT_TRUE(registry.CounterFamily("splitspec_clash", "Counter first.").ok());
  EXPECT_FALSE(registry.GaugeFamily("splitspec_clash", "Then a gauge.").ok());

  auto family = registry.CounterFamily("splitspec_labels_total", "Labels.");
  ASSERT_TRUE(family.ok());
  EXPECT_FALSE(MetricsRegistry::AddCounter(**family, {{"0bad", "v"}}).ok());
  EXPECT_FALSE(MetricsRegistry::AddCounter(**family, {{"__reserved", "v"}}).ok());

  auto hist = registry.HistogramFamily("splitspec_buckets_seconds", "Buckets.");
  ASSERT_TRUE(hist.ok());
  EXPECT_FALSE(MetricsRegistry::AddHistogram(**hist, {}, {1.0, 1.0}).ok());
  EXPECT_FALSE(MetricsRegistry::AddHistogram(**hist, {}, {2.0, 1.0}).ok());
  EXPECT_FALSE(MetricsRegistry::AddHistogram(**hist, {}, {1.0, HUGE_VAL}).ok());
  EXPECT_TRUE(MetricsRegistry::AddHistogram(**hist, {}, {1.0, 2.0}).ok());
}

}  // namespace
}  // namespace splitspec::metrics
