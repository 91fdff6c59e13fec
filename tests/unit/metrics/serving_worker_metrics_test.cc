// RouterServingMetrics and WorkerMetrics: values after scripted events.
#include <string>

#include "common/metrics/router_serving_metrics.h"
#include "common/metrics/worker_metrics.h"
#include "gtest/gtest.h"
#include "tests/unit/metrics/registry_exposition.h"

namespace splitspec::metrics {
namespace {

using testing::Bucket;
using testing::Exposition;
using testing::Parse;
using testing::ParseExposition;

TEST(RouterServingMetricsTest, StepSpreadsBurstIntervalsOverTokens) {
  MetricsRegistry registry;
  auto serving = RouterServingMetrics::Create(registry);
  ASSERT_TRUE(serving.ok()) << serving.status();
  StepStageSeconds stages;
  stages.schedule = 0.0003;
  stages.draft = 0.002;
  stages.verify = 0.008;
  stages.rpc_overhead = 0.001;
  stages.router = 0.00007;
  // 3 tokens after 30 ms: three gaps of 10 ms; 1 token after 10 ms: one gap; a first token:
  // counted as output, not as a gap; an empty emission: nothing.
  TokenEmission first;
  first.n_tokens = 1;
  first.first = true;
  (*serving)->RecordStep(stages, {{0.03, 3}, {0.01, 1}, first, {0.5, 0}});

  Exposition e = Parse(registry);
  EXPECT_EQ(e.Value("splitspec_generation_tokens_total"), 5.0);
  const std::string itl = "splitspec_inter_token_latency_seconds";
  EXPECT_EQ(e.Value(itl + "_count"), 4.0);
  EXPECT_DOUBLE_EQ(*e.Value(itl + "_sum"), 0.04);
  EXPECT_EQ(Bucket(e, itl, {}, 0.0075), 0.0);
  EXPECT_EQ(Bucket(e, itl, {}, 0.01), 4.0);

  const std::string stage = "splitspec_step_stage_duration_seconds";
  EXPECT_EQ(e.Value(stage + "_count", {{"stage", "schedule"}}), 1.0);
  EXPECT_DOUBLE_EQ(*e.Value(stage + "_sum", {{"stage", "verify"}}), 0.008);
  EXPECT_DOUBLE_EQ(*e.Value(stage + "_sum", {{"stage", "draft"}}), 0.002);
  EXPECT_DOUBLE_EQ(*e.Value(stage + "_sum", {{"stage", "rpc_overhead"}}), 0.001);
  EXPECT_DOUBLE_EQ(*e.Value(stage + "_sum", {{"stage", "router"}}), 0.00007);
  EXPECT_EQ(Bucket(e, stage, {{"stage", "router"}}, 0.00005), 0.0);
  EXPECT_EQ(Bucket(e, stage, {{"stage", "router"}}, 0.0001), 1.0);
  EXPECT_EQ(Bucket(e, stage, {{"stage", "verify"}}, 0.005), 0.0);
  EXPECT_EQ(Bucket(e, stage, {{"stage", "verify"}}, 0.01), 1.0);
}

TEST(RouterServingMetricsTest, PipelineOutcomesAccumulateAndOverheadsFallInFineBuckets) {
  MetricsRegistry registry;
  auto serving = RouterServingMetrics::Create(registry);
  ASSERT_TRUE(serving.ok()) << serving.status();
  StepPipelineOutcome first;
  first.overhead_seconds = 0.00009;
  first.hypothesis_held = 2;
  first.dropped = 1;
  first.draft_seconds = 0.004;
  first.hidden_draft_seconds = 0.003;
  first.verify_slowdown = 0.4;
  StepPipelineOutcome second;
  second.overhead_seconds = 0.00014;
  second.alternative_held = 3;
  second.draft_seconds = 0.001;
  second.verify_slowdown = 0.5;
  (*serving)->RecordPipeline(first);
  (*serving)->RecordPipeline(second);

  Exposition e = Parse(registry);
  const std::string ahead = "splitspec_draft_ahead_total";
  EXPECT_EQ(e.Value(ahead, {{"outcome", "hypothesis"}}), 2.0);
  EXPECT_EQ(e.Value(ahead, {{"outcome", "alternative"}}), 3.0);
  EXPECT_EQ(e.Value(ahead, {{"outcome", "dropped"}}), 1.0);
  EXPECT_DOUBLE_EQ(*e.Value("splitspec_draft_compute_seconds_total"), 0.005);
  EXPECT_DOUBLE_EQ(*e.Value("splitspec_draft_hidden_seconds_total"), 0.003);
  EXPECT_DOUBLE_EQ(*e.Value("splitspec_draft_ahead_verify_slowdown"), 0.5);  // the last step's
  const std::string overhead = "splitspec_step_overhead_seconds";
  EXPECT_EQ(e.Value(overhead + "_count"), 2.0);
  EXPECT_EQ(Bucket(e, overhead, {}, 0.000075), 0.0);
  EXPECT_EQ(Bucket(e, overhead, {}, 0.0001), 1.0);
  EXPECT_EQ(Bucket(e, overhead, {}, 0.00015), 2.0);
}

TEST(RouterServingMetricsTest, RequestLifecycleCounters) {
  MetricsRegistry registry;
  auto serving = RouterServingMetrics::Create(registry);
  ASSERT_TRUE(serving.ok());
  RouterServingMetrics& s = **serving;
  s.RecordAdmitted(0.2, 100);
  s.RecordAdmitted(0.01, 28);
  s.RecordFirstToken(0.3);
  s.RecordFinished(RequestStatus::kStop, 2.0);
  s.RecordFinished(RequestStatus::kStop, 4.0);
  s.RecordFinished(RequestStatus::kLength, 1.0);
  s.RecordFinished(RequestStatus::kRejected, 0.0);
  s.RecordFinished(static_cast<RequestStatus>(42), 1.0);  // unknown status counts as error
  s.SetLoad(7, 31);

  Exposition e = Parse(registry);
  EXPECT_EQ(e.Value("splitspec_requests_total", {{"status", "stop"}}), 2.0);
  EXPECT_EQ(e.Value("splitspec_requests_total", {{"status", "length"}}), 1.0);
  EXPECT_EQ(e.Value("splitspec_requests_total", {{"status", "rejected"}}), 1.0);
  EXPECT_EQ(e.Value("splitspec_requests_total", {{"status", "cancelled"}}), 0.0);
  EXPECT_EQ(e.Value("splitspec_requests_total", {{"status", "error"}}), 1.0);
  // The rejected request never ran: no e2e observation.
  EXPECT_EQ(e.Value("splitspec_e2e_request_latency_seconds_count"), 4.0);
  EXPECT_DOUBLE_EQ(*e.Value("splitspec_e2e_request_latency_seconds_sum"), 8.0);
  EXPECT_EQ(e.Value("splitspec_prompt_tokens_total"), 128.0);
  EXPECT_EQ(e.Value("splitspec_request_queue_time_seconds_count"), 2.0);
  EXPECT_EQ(Bucket(e, "splitspec_request_queue_time_seconds", {}, 0.1), 1.0);
  EXPECT_EQ(e.Value("splitspec_time_to_first_token_seconds_count"), 1.0);
  EXPECT_EQ(e.Value("splitspec_requests_waiting"), 7.0);
  EXPECT_EQ(e.Value("splitspec_requests_running"), 31.0);
}

TEST(WorkerMetricsTest, ForwardKvSessionsAndErrors) {
  MetricsRegistry registry;
  auto verifier = WorkerMetrics::Create(registry, WorkerRole::kVerifier);
  auto drafter = WorkerMetrics::Create(registry, WorkerRole::kDrafter);
  ASSERT_TRUE(verifier.ok() && drafter.ok());
  (*verifier)->RecordForward(ForwardKind::kVerify, 0.02, 8, 40);
  (*verifier)->RecordForward(ForwardKind::kPrefill, 0.1, 1, 512);
  (*drafter)->RecordForward(ForwardKind::kDraftStep, 0.001, 3, 3);
  (*verifier)->SetKvBlocks(300, 724);
  (*drafter)->SetKvBlocks(10, 90);
  (*verifier)->SetLiveSessions(8);
  (*verifier)->RecordRpcError(absl::StatusCode::kInvalidArgument);
  (*verifier)->RecordRpcError(absl::StatusCode::kInvalidArgument);
  (*verifier)->RecordRpcError(absl::StatusCode::kOk);  // not an error
  (*verifier)->RecordRpcError(static_cast<absl::StatusCode>(99));

  Exposition e = Parse(registry);
  const std::map<std::string, std::string> verify = {{"role", "verifier"}, {"kind", "verify"}};
  EXPECT_EQ(e.Value("splitspec_worker_forward_duration_seconds_count", verify), 1.0);
  EXPECT_EQ(e.Value("splitspec_worker_forward_duration_seconds_count",
                    {{"role", "drafter"}, {"kind", "verify"}}),
            0.0);
  EXPECT_EQ(Bucket(e, "splitspec_worker_forward_batch_size", verify, 4), 0.0);
  EXPECT_EQ(Bucket(e, "splitspec_worker_forward_batch_size", verify, 8), 1.0);
  EXPECT_EQ(Bucket(e, "splitspec_worker_forward_tokens", verify, 32), 0.0);
  EXPECT_EQ(Bucket(e, "splitspec_worker_forward_tokens", verify, 64), 1.0);
  EXPECT_EQ(
      e.Value("splitspec_worker_forward_tokens_sum", {{"role", "verifier"}, {"kind", "prefill"}}),
      512.0);
  EXPECT_EQ(e.Value("splitspec_worker_forward_batch_size_sum",
                    {{"role", "drafter"}, {"kind", "draft_step"}}),
            3.0);
  EXPECT_EQ(e.Value("splitspec_worker_kv_blocks_used", {{"role", "verifier"}}), 300.0);
  EXPECT_EQ(e.Value("splitspec_worker_kv_blocks_free", {{"role", "verifier"}}), 724.0);
  EXPECT_EQ(e.Value("splitspec_worker_kv_blocks_used", {{"role", "drafter"}}), 10.0);
  EXPECT_EQ(e.Value("splitspec_worker_live_sessions", {{"role", "verifier"}}), 8.0);
  EXPECT_EQ(e.Value("splitspec_worker_rpc_errors_total",
                    {{"role", "verifier"}, {"code", "INVALID_ARGUMENT"}}),
            2.0);
  EXPECT_EQ(
      e.Value("splitspec_worker_rpc_errors_total", {{"role", "verifier"}, {"code", "UNKNOWN"}}),
      1.0);
  // Every non-OK code is pre-created (16 per role) and OK never is.
  EXPECT_EQ(e.Find("splitspec_worker_rpc_errors_total", {{"role", "drafter"}}).size(), 16u);
  EXPECT_TRUE(e.Find("splitspec_worker_rpc_errors_total", {{"code", "OK"}}).empty());
}

}  // namespace
}  // namespace splitspec::metrics
