// /server_info JSON built from speculation snapshots.
#include "common/metrics/server_info.h"

#include "common/metrics/router_spec_metrics.h"
#include "gtest/gtest.h"

namespace splitspec::metrics {
namespace {

TEST(ServerInfoTest, SglangFieldsFromRecordedSteps) {
  MetricsRegistry registry;
  RouterSpecMetricsOptions options;
  options.pool = "draft-model";
  options.policy = "sglang_tiers";
  options.max_k = 3;
  auto spec = RouterSpecMetrics::Create(registry, options);
  ASSERT_TRUE(spec.ok());
  // 4 drafts, 6 accepted: avg accept length 1 + 6/4 = 2.5; 9 draft tokens.
  (*spec)->RecordStep({{3, 3}, {3, 1}, {1, 1}, {2, 1}, {0, 0}});
  (*spec)->SetActiveTier(3);

  const SpecSnapshot snap = (*spec)->Snapshot();
  nlohmann::json info = ServerInfoJson({snap});
  EXPECT_EQ(info["speculative_num_steps"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(info["avg_spec_accept_length"].get<double>(), 2.5);
  ASSERT_EQ(info["internal_states"].size(), 1u);
  const nlohmann::json& state = info["internal_states"][0];
  EXPECT_EQ(state["pool"], "draft-model");
  EXPECT_EQ(state["speculative_num_steps"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(state["avg_spec_accept_length"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(state["spec_acceptance_rate"].get<double>(), 6.0 / 9.0);
  // Per position over 4 drafts: a > 0: 4 of 4, a > 1: 1, a > 2: 1.
  const std::vector<double> rates = state["spec_acceptance_rate_per_position"];
  EXPECT_EQ(rates, (std::vector<double>{1.0, 0.25, 0.25}));
}

TEST(ServerInfoTest, PoolsAggregateFromTotals) {
  SpecSnapshot a;
  a.num_drafts = 10;
  a.num_accepted_tokens = 30;
  a.num_draft_tokens = 40;
  a.active_tier = 3;
  SpecSnapshot b;
  b.num_drafts = 30;
  b.num_accepted_tokens = 10;
  b.num_draft_tokens = 60;
  b.active_tier = 1;
  nlohmann::json info = ServerInfoJson({a, b});
  // (30 + 10) / (10 + 30) = 1 accepted per draft, not the mean of 4.0 and 1.33.
  EXPECT_DOUBLE_EQ(info["avg_spec_accept_length"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(info["spec_acceptance_rate"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(info["speculative_num_steps"].get<double>(), 2.0);
  EXPECT_EQ(info["internal_states"].size(), 2u);

  nlohmann::json empty = ServerInfoJson({});
  EXPECT_EQ(empty["avg_spec_accept_length"].get<double>(), 0.0);
  EXPECT_TRUE(empty["internal_states"].empty());
}

}  // namespace
}  // namespace splitspec::metrics
