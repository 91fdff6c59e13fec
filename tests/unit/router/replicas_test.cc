// Verifier replicas and drafter standbys without gRPC: placement by free KV, failover of a
// dead replica's requests (outputs unchanged), the wait when no replica is left, probing back,
// deadline backoff for a slow replica, and a drafter pool moving a failed replica's requests to
// another (tests/unit/router/drafter_replicas_test.cc has the pool's own decisions).
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "router/replicated_drafter.h"
#include "router/verifier_replicas.h"
#include "tests/unit/router/router_harness.h"

namespace splitspec::router::testing {
namespace {

TEST(VerifierReplicasTest, ChoosesTheUpReplicaWithTheMostFreeKv) {
  FakeVerifier a, b, c;
  VerifierReplicas replicas({&a, &b, &c}, 0.25);
  replicas.MarkUp(0, 100);
  replicas.MarkUp(1, 100);
  replicas.MarkUp(2, 300);
  replicas.MarkDown(2, 0.0, false);
  EXPECT_EQ(replicas.Choose(10), 0);  // tie: the lowest index
  replicas.Reserve(0, 30);
  EXPECT_EQ(replicas.Choose(10), 1);
  replicas.Reserve(1, 95);
  EXPECT_EQ(replicas.Choose(10), 0);
  EXPECT_EQ(replicas.Choose(71), -1);  // nobody up has room; the down one is not a candidate
  EXPECT_EQ(replicas.MaxTotalBlocks(), 300);
  EXPECT_EQ(replicas.UpTotalBlocks(), 200);
  EXPECT_EQ(replicas.ReservedBlocks(), 125);
}

TEST(VerifierReplicasTest, DownReplicasAreProbedAfterTheIntervalAndSlowOnesGetLongerDeadlines) {
  FakeVerifier a, b;
  VerifierReplicas replicas({&a, &b}, 0.5);
  replicas.MarkUp(0, 10);
  replicas.MarkUp(1, 10);
  replicas.MarkDown(0, 10.0, /*deadline_exceeded=*/true);
  replicas.MarkDown(1, 10.0, /*deadline_exceeded=*/false);
  EXPECT_TRUE(replicas.DueForProbe(10.4).empty());
  EXPECT_NEAR(replicas.SecondsToNextProbe(10.4), 0.1, 1e-9);
  EXPECT_EQ(replicas.DueForProbe(10.5), std::vector<int>({0, 1}));
  replicas.ProbeFailed(1, 10.5);
  replicas.MarkUp(0, 10);
  EXPECT_DOUBLE_EQ(replicas.at(0).timeout_scale, 2.0);  // timed out, then proved alive: slow
  EXPECT_TRUE(replicas.DueForProbe(10.9).empty());
  EXPECT_EQ(replicas.DueForProbe(11.0), std::vector<int>({1}));
  replicas.MarkUp(1, 10);
  EXPECT_DOUBLE_EQ(replicas.at(1).timeout_scale, 1.0);  // it failed, it was not slow
}

// A RouterCore over two fake verifier replicas and one drafter.
struct TwoReplicas {
  explicit TwoReplicas(const std::string& policy, RouterOptions options = {}) {
    drafter.verifier = nullptr;  // sessions are split over two verifiers
    auto p = MakePolicy(policy, nlohmann::json::object());
    EXPECT_TRUE(p.ok());
    core = std::make_unique<RouterCore>(std::move(options), std::vector<VerifierClient*>{&a, &b},
                                        DrafterPools{{"pool0", &drafter}}, std::move(*p),
                                        LatencyModel(), &clock);
  }
  RequestId Submit(int32_t seed, int32_t max_tokens) { return SubmitCollected(*core, &out, seed, max_tokens); }
  void RunUntilIdle(int max_steps = 20000) {
    for (int i = 0; i < max_steps && !core->Idle(); ++i) core->RunStep();
    EXPECT_TRUE(core->Idle());
  }
  FakeVerifier a, b;
  FakeDrafter drafter;
  VirtualClock clock;
  std::unique_ptr<RouterCore> core;
  std::map<RequestId, Collected> out;
};

TEST(ReplicaFailoverTest, RequestsSpreadOverReplicasByFreeKv) {
  TwoReplicas t("static:3");
  ASSERT_TRUE(t.core->Init().ok());
  std::vector<RequestId> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(t.Submit(20 + i, 16));
  t.core->RunStep();
  EXPECT_EQ(t.a.sessions.size(), 4u);
  EXPECT_EQ(t.b.sessions.size(), 4u);
  t.RunUntilIdle();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(t.out[ids[i]].tokens, ReferenceGeneration(Prompt(20 + i, 9), 16));
}

// The headline property: a replica dies mid-generation; every request finishes, outputs equal
// the no-fault reference token for token, and nobody sees an error.
TEST(ReplicaFailoverTest, DeadReplicasRequestsContinueElsewhereWithIdenticalOutput) {
  for (const char* policy : {"none", "static:3", "smartspec"}) {
    TwoReplicas t(policy);
    ASSERT_TRUE(t.core->Init().ok());
    std::vector<RequestId> ids;
    for (int i = 0; i < 10; ++i) ids.push_back(t.Submit(40 + i, 30));
    for (int i = 0; i < 5; ++i) t.core->RunStep();
    ASSERT_FALSE(t.a.sessions.empty());
    t.a.down = true;  // kill -9
    t.RunUntilIdle();
    for (int i = 0; i < 10; ++i) {
      const Collected& c = t.out[ids[i]];
      EXPECT_EQ(c.final_event.finish_reason, FinishReason::kLength) << policy << ": " << c.final_event.status;
      EXPECT_EQ(c.tokens, ReferenceGeneration(Prompt(40 + i, 9), 30)) << policy << " request " << i;
    }
    EXPECT_TRUE(t.b.protocol_errors.empty()) << t.b.protocol_errors[0];
    EXPECT_TRUE(t.b.sessions.empty());
    // New requests keep coming in and go to the live replica.
    const RequestId late = t.Submit(99, 12);
    t.RunUntilIdle();
    EXPECT_EQ(t.out[late].tokens, ReferenceGeneration(Prompt(99, 9), 12));
  }
}

TEST(ReplicaFailoverTest, WithNoReplicaLeftRequestsWaitThenFail) {
  RouterOptions options;
  options.failover_wait_seconds = 5;
  TwoReplicas t("static:2", options);
  ASSERT_TRUE(t.core->Init().ok());
  const RequestId id = t.Submit(7, 40);
  t.core->RunStep();
  t.a.down = t.b.down = true;
  for (int i = 0; i < 50; ++i) t.core->RunStep();
  EXPECT_FALSE(t.out[id].finished);  // waiting, not failed: the clock has not moved
  t.clock.Advance(4.0);
  t.core->RunStep();
  EXPECT_FALSE(t.out[id].finished);
  t.clock.Advance(1.5);
  t.core->RunStep();
  ASSERT_TRUE(t.out[id].finished);
  EXPECT_EQ(t.out[id].final_event.finish_reason, FinishReason::kError);
  EXPECT_EQ(t.out[id].final_event.status.code(), absl::StatusCode::kUnavailable);
}

TEST(ReplicaFailoverTest, ARecoveredReplicaTakesTheWaitingRequests) {
  TwoReplicas t("static:2");
  ASSERT_TRUE(t.core->Init().ok());
  const RequestId id = t.Submit(8, 40);
  for (int i = 0; i < 3; ++i) t.core->RunStep();
  t.a.down = t.b.down = true;
  for (int i = 0; i < 5; ++i) t.core->RunStep();
  t.b.down = false;
  t.clock.Advance(1.0);  // past the probe interval
  t.RunUntilIdle();
  EXPECT_EQ(t.out[id].final_event.finish_reason, FinishReason::kLength);
  EXPECT_EQ(t.out[id].tokens, ReferenceGeneration(Prompt(8, 9), 40));
}

TEST(ReplicatedDrafterTest, AFailedReplicaIsReplacedAndSpeculationContinues) {
  FakeVerifier verifier;
  FakeDrafter first(0.9, 1), second(0.9, 2);
  VirtualClock clock;
  ReplicatedDrafter pool({&first, &second}, &clock, 1.0);
  auto p = MakePolicy("static:3", nlohmann::json::object());
  ASSERT_TRUE(p.ok());
  RouterCore core(RouterOptions{}, &verifier, DrafterPools{{"pool0", &pool}}, std::move(*p), LatencyModel(),
                  &clock);
  ASSERT_TRUE(core.Init().ok());
  Collected out;
  GenerateRequest request;
  request.prompt = Prompt(5, 9);
  request.max_tokens = 80;
  ASSERT_TRUE(core.Submit(std::move(request), [&out](const StreamEvent& e) {
                    out.tokens.insert(out.tokens.end(), e.tokens.begin(), e.tokens.end());
                    if (e.finished) {
                      out.finished = true;
                      out.final_event = e;
                    }
                  }).ok());
  for (int i = 0; i < 4; ++i) core.RunStep();
  EXPECT_GT(first.tokens_proposed, 0);
  EXPECT_EQ(first.sessions.size(), 1u);  // the least loaded replica (a tie: the first)
  first.down = true;
  for (int i = 0; i < 1000 && !core.Idle(); ++i) core.RunStep();
  EXPECT_EQ(out.tokens, ReferenceGeneration(Prompt(5, 9), 80));
  EXPECT_EQ(out.final_event.finish_reason, FinishReason::kLength);
  EXPECT_GT(second.tokens_proposed, 0);  // speculation went on at the other replica
  EXPECT_TRUE(second.protocol_errors.empty()) << second.protocol_errors[0];
  EXPECT_TRUE(second.sessions.empty());  // released there at the end
}

}  // namespace
}  // namespace splitspec::router::testing
