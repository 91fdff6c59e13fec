// RouterMetrics (router/service/router_metrics.h) driven through the router core's hooks with
// scripted steps and request events on a virtual clock, read back from the exposition.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/metrics/metrics_registry.h"
#include "router/clock.h"
#include "router/router_core.h"
#include "router/service/router_metrics.h"
#include "tests/unit/metrics/exposition_parser.h"
#include "tests/unit/router/router_harness.h"

namespace splitspec::router {
namespace {

using metrics::testing::Exposition;
using metrics::testing::ParseExposition;

class RouterMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RouterMetricsOptions options;
    options.pools = {"a", "b"};
    options.policy = "p";
    options.max_k = 4;
    auto created = RouterMetrics::Create(registry_, options, &clock_);
    ASSERT_TRUE(created.ok()) << created.status();
    metrics_ = std::move(*created);
    metrics_->Install(&router_options_);
  }

  Exposition Read() {
    auto parsed = ParseExposition(registry_.Serialize());
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return parsed.ok() ? *parsed : Exposition{};
  }
  double Value(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    return Read().Value(name, labels).value_or(-1);
  }

  static StreamEvent Tokens(RequestId id, int n) {
    StreamEvent e;
    e.id = id;
    e.tokens.assign(n, 7);
    return e;
  }

  metrics::MetricsRegistry registry_;
  VirtualClock clock_;
  RouterOptions router_options_;
  std::unique_ptr<RouterMetrics> metrics_;
};

TEST_F(RouterMetricsTest, RouterCoreFeedsTheInstalledHooks) {
  // A real core over in-process fake workers, with the options the metrics installed into.
  testing::Harness harness("static:3", router_options_, nlohmann::json::object(), /*n_drafters=*/1);
  harness.pool_names = {"a"};
  harness.Build("static:3", router_options_, nlohmann::json::object());
  ASSERT_TRUE(harness.core->Init().ok());
  absl::StatusOr<RequestId> id = harness.Submit(testing::Prompt(1, 8), /*max_tokens=*/12);
  ASSERT_TRUE(id.ok()) << id.status();
  harness.RunUntilIdle();
  const Usage& usage = harness.out[*id].final_event.usage;
  ASSERT_GT(usage.drafted_tokens, 0);
  // The admission hook saw the prompt; the step hook saw every draft the request was told of.
  EXPECT_EQ(Value("splitspec_prompt_tokens_total"), 8);
  EXPECT_EQ(Value("splitspec_spec_decode_num_draft_tokens_total", {{"pool", "a"}}), usage.drafted_tokens);
  EXPECT_EQ(Value("splitspec_spec_decode_num_accepted_tokens_total", {{"pool", "a"}}), usage.accepted_tokens);
  EXPECT_EQ(Value("splitspec_spec_decode_num_draft_tokens_total", {{"pool", "b"}}), 0);
}

// With the pipeline, every draft made ahead is counted once by its outcome, as /server_info
// counts them; each decode step observes its overhead once.
TEST_F(RouterMetricsTest, DraftAheadOutcomesAndStepOverheads) {
  router_options_.pipeline = true;
  router_options_.draft_ahead_alternatives = 2;
  testing::Harness harness("static:3", router_options_, nlohmann::json::object(), /*n_drafters=*/1);
  harness.pool_names = {"a"};
  harness.drafters[0] = std::make_unique<testing::FakeDrafter>(0.7, 3);
  LatencyModel model;
  model.set_target({0.0, 0.0, 0.01});  // a draft made ahead always fits in the verify call
  model.set_drafter("a", DrafterCost{false, ForwardCoefficients{0.0, 0.0, 0.0005}, 0});
  model.set_rpc_seconds(0.0001);
  harness.core = std::make_unique<RouterCore>(router_options_, &harness.verifier,
                                              DrafterPools{{"a", harness.drafters[0].get()}},
                                              std::move(*MakePolicy("static:3", nlohmann::json::object())), model,
                                              &harness.clock);
  ASSERT_TRUE(harness.core->Init().ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(harness.Submit(testing::Prompt(1 + i, 8), /*max_tokens=*/30).ok());
  harness.RunUntilIdle();
  const ServerInfo info = harness.core->Snapshot();
  const double hypothesis = Value("splitspec_draft_ahead_total", {{"outcome", "hypothesis"}});
  const double alternative = Value("splitspec_draft_ahead_total", {{"outcome", "alternative"}});
  const double dropped = Value("splitspec_draft_ahead_total", {{"outcome", "dropped"}});
  EXPECT_GT(hypothesis, 0);
  EXPECT_GT(alternative, 0);
  EXPECT_EQ(alternative, info.draft_ahead_alternatives_held);
  EXPECT_EQ(dropped, info.draft_ahead_dropped);
  // Every draft kept was used by the step after it, but a request's last one.
  EXPECT_LE(info.draft_ahead_used, hypothesis + alternative);
  EXPECT_GE(info.draft_ahead_used, hypothesis + alternative - 3);
  EXPECT_EQ(Value("splitspec_step_overhead_seconds_count"), info.steps);
  const double drafted = Value("splitspec_draft_compute_seconds_total");
  const double hidden = Value("splitspec_draft_hidden_seconds_total");
  EXPECT_NEAR(drafted, info.draft_seconds_total, 1e-9);
  EXPECT_NEAR(hidden, info.hidden_draft_seconds_total, 1e-9);
}

TEST_F(RouterMetricsTest, StepOutcomesAreGroupedByPool) {
  StepStats step;
  step.requests = {RequestOutcome{1, "a", 3, 2, {}}, RequestOutcome{2, "b", 2, 0, {}},
                   RequestOutcome{3, "a", 4, 4, {}}, RequestOutcome{4, "", 0, 0, {}}};
  step.wall_seconds = 0.5;
  step.emitted_tokens = 10;
  step.estimated_goodput = 12.5;
  router_options_.step_observer(step);

  EXPECT_EQ(Value("splitspec_spec_decode_num_drafts_total", {{"pool", "a"}}), 2);
  EXPECT_EQ(Value("splitspec_spec_decode_num_draft_tokens_total", {{"pool", "a"}}), 7);
  EXPECT_EQ(Value("splitspec_spec_decode_num_accepted_tokens_total", {{"pool", "a"}}), 6);
  EXPECT_EQ(Value("splitspec_spec_decode_num_drafts_total", {{"pool", "b"}}), 1);
  EXPECT_EQ(Value("splitspec_spec_decode_num_accepted_tokens_total", {{"pool", "b"}}), 0);
  // Accepted 2 and 4 in pool a: positions 0 and 1 twice, 2 and 3 once.
  for (const auto& [position, want] : std::vector<std::pair<std::string, double>>{{"0", 2}, {"1", 2}, {"2", 1}, {"3", 1}}) {
    EXPECT_EQ(Value("splitspec_spec_decode_num_accepted_tokens_per_pos_total", {{"pool", "a"}, {"position", position}}),
              want)
        << position;
  }
  // The request without a pool (k = 0) counts under the first pool's proposal lengths only.
  EXPECT_EQ(Value("splitspec_spec_decode_proposal_length_count", {{"pool", "a"}}), 3);
  EXPECT_EQ(Value("splitspec_spec_decode_proposal_length_bucket", {{"pool", "a"}, {"le", "0"}}), 1);
  EXPECT_EQ(Value("splitspec_spec_decode_proposal_length_count", {{"pool", "b"}}), 1);
  // Not tiered: the active tier is the pool's mean k over its requests this step.
  EXPECT_DOUBLE_EQ(Value("splitspec_spec_active_tier", {{"pool", "a"}}), 7.0 / 3.0);
  EXPECT_DOUBLE_EQ(Value("splitspec_spec_goodput_observed_tokens_per_second", {{"pool", "b"}}), 20.0);
  EXPECT_DOUBLE_EQ(Value("splitspec_spec_goodput_estimated_tokens_per_second", {{"pool", "b"}}), 12.5);
  EXPECT_EQ(Value("splitspec_step_stage_duration_seconds_count", {{"stage", "verify"}}), 1);

  const std::vector<metrics::SpecSnapshot> snapshots = metrics_->Snapshots();
  ASSERT_EQ(snapshots.size(), 2u);
  EXPECT_EQ(snapshots[0].pool, "a");
  EXPECT_DOUBLE_EQ(snapshots[0].AvgAcceptLength(), 1.0 + 6.0 / 2.0);
  const nlohmann::json info = metrics_->ServerInfoJson(ServerInfo{});
  EXPECT_DOUBLE_EQ(info["avg_spec_accept_length"].get<double>(), 1.0 + 6.0 / 3.0);
}

TEST_F(RouterMetricsTest, RequestLifecycleTimesAndLoad) {
  std::vector<StreamEvent> delivered;
  metrics_->RecordSubmitted();
  EventSink sink = metrics_->WrapSink([&](const StreamEvent& e) { delivered.push_back(e); }, /*arrival=*/0.0);
  EXPECT_EQ(Value("splitspec_requests_waiting"), 1);

  clock_.AdvanceTo(0.25);
  router_options_.admission_observer(/*id=*/5, /*queue_seconds=*/0.25, /*prompt_tokens=*/9);
  EXPECT_EQ(Value("splitspec_requests_waiting"), 0);
  EXPECT_EQ(Value("splitspec_requests_running"), 1);
  EXPECT_EQ(Value("splitspec_prompt_tokens_total"), 9);
  EXPECT_DOUBLE_EQ(Value("splitspec_request_queue_time_seconds_sum"), 0.25);

  clock_.AdvanceTo(1.0);
  sink(Tokens(5, 1));  // first token, from the prefill
  EXPECT_DOUBLE_EQ(Value("splitspec_time_to_first_token_seconds_sum"), 1.0);
  clock_.AdvanceTo(1.5);
  sink(Tokens(5, 2));  // a burst of two after 0.5 s: two gaps of 0.25 s
  router_options_.step_observer(StepStats{});
  EXPECT_EQ(Value("splitspec_generation_tokens_total"), 3);
  EXPECT_EQ(Value("splitspec_inter_token_latency_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(Value("splitspec_inter_token_latency_seconds_sum"), 0.5);
  EXPECT_EQ(Value("splitspec_inter_token_latency_seconds_bucket", {{"le", "0.1"}}), 0);
  EXPECT_EQ(Value("splitspec_inter_token_latency_seconds_bucket", {{"le", "0.25"}}), 2);

  clock_.AdvanceTo(2.0);
  StreamEvent last = Tokens(5, 0);
  last.finished = true;
  last.finish_reason = FinishReason::kEos;
  sink(last);
  EXPECT_EQ(Value("splitspec_requests_total", {{"status", "stop"}}), 1);
  EXPECT_DOUBLE_EQ(Value("splitspec_e2e_request_latency_seconds_sum"), 2.0);
  EXPECT_EQ(Value("splitspec_requests_running"), 0);
  EXPECT_EQ(Value("splitspec_requests_waiting"), 0);
  EXPECT_EQ(delivered.size(), 3u);  // the wrapped sink still gets every event
}

TEST_F(RouterMetricsTest, RequestsEndingAtPrefillAreFlushedWhenIdle) {
  metrics_->RecordSubmitted();
  EventSink sink = metrics_->WrapSink(nullptr, 0.0);
  router_options_.admission_observer(8, 0.0, 3);
  StreamEvent only = Tokens(8, 1);
  only.finished = true;
  only.finish_reason = FinishReason::kLength;
  sink(only);
  EXPECT_EQ(Value("splitspec_generation_tokens_total"), 0);  // waits for a step...
  metrics_->OnIdle();                                           // ...or the loop going idle
  EXPECT_EQ(Value("splitspec_generation_tokens_total"), 1);
  EXPECT_EQ(Value("splitspec_requests_total", {{"status", "length"}}), 1);
}

TEST_F(RouterMetricsTest, RejectionsAndQueueCancellations) {
  metrics_->RecordSubmitted();
  metrics_->RecordRejected(/*was_submitted=*/true);  // Submit refused it
  metrics_->RecordRejected(/*was_submitted=*/false);  // refused before Submit
  EXPECT_EQ(Value("splitspec_requests_total", {{"status", "rejected"}}), 2);
  EXPECT_EQ(Value("splitspec_e2e_request_latency_seconds_count"), 0);
  EXPECT_EQ(Value("splitspec_requests_waiting"), 0);

  // Cancelled while queued: never admitted, so it leaves the waiting count.
  metrics_->RecordSubmitted();
  EventSink sink = metrics_->WrapSink(nullptr, 0.0);
  StreamEvent cancelled;
  cancelled.id = 9;
  cancelled.finished = true;
  cancelled.finish_reason = FinishReason::kCancelled;
  sink(cancelled);
  EXPECT_EQ(Value("splitspec_requests_total", {{"status", "cancelled"}}), 1);
  EXPECT_EQ(Value("splitspec_requests_waiting"), 0);
  EXPECT_EQ(Value("splitspec_requests_running"), 0);
}

}  // namespace
}  // namespace splitspec::router
