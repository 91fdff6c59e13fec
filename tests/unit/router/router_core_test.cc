// RouterCore against in-process fake workers: batching, admission, queue limit, cancel,
// worker failures, stop conditions, bad input, greedy correctness for every policy.
#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include <condition_variable>
#include <mutex>
#include "gtest/gtest.h"
#include "tests/unit/router/router_harness.h"

namespace splitspec::router::testing {
namespace {

TEST(RouterCoreTest, SubmitBeforeInitIsRefused) {
  Harness h("none");
  auto id = h.Submit(Prompt(1, 8), 4);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
}

// Ids carry the router's instance id in their high bits: two routers (or a router and its
// restarted successor) on the same workers never hand out the same id.
TEST(RouterCoreTest, RequestIdsCarryTheInstanceId) {
  RouterOptions pinned;
  pinned.instance_id = 0xABCDEF;
  Harness a("none", pinned);
  Harness b("none");
  Harness c("none");
  ASSERT_TRUE(a.core->Init().ok() && b.core->Init().ok() && c.core->Init().ok());
  EXPECT_EQ(a.core->instance_id(), 0xABCDEFu);
  EXPECT_NE(b.core->instance_id(), 0u);
  EXPECT_NE(b.core->instance_id(), c.core->instance_id());  // drawn at random (24 bits)
  std::set<RequestId> ids;
  for (Harness* h : {&a, &b, &c}) {
    for (int i = 0; i < 50; ++i) {
      auto id = h->Submit(Prompt(i, 4), 1);
      ASSERT_TRUE(id.ok());
      EXPECT_EQ(*id >> RouterCore::kSequenceBits, h->core->instance_id());
      EXPECT_TRUE(ids.insert(*id).second) << "duplicate id " << *id;
    }
  }
}

TEST(RouterCoreTest, PlainDecodeMatchesReference) {
  Harness h("none");
  ASSERT_TRUE(h.core->Init().ok());
  auto id = h.Submit(Prompt(1, 8), 12);
  ASSERT_TRUE(id.ok());
  h.RunUntilIdle();
  const Collected& c = h.out[*id];
  EXPECT_EQ(c.tokens, ReferenceGeneration(Prompt(1, 8), 12));
  EXPECT_TRUE(c.finished);
  EXPECT_EQ(c.final_event.finish_reason, FinishReason::kLength);
  EXPECT_EQ(c.final_event.usage.prompt_tokens, 8);
  EXPECT_EQ(c.final_event.usage.completion_tokens, 12);
  EXPECT_EQ(c.final_event.usage.steps, 12);  // prefill + 11 decode steps, one token each
  EXPECT_EQ(c.final_event.usage.drafted_tokens, 0);
  EXPECT_TRUE(h.drafters[0]->proposed_ids.empty());
  EXPECT_TRUE(h.verifier.sessions.empty());  // released at the end
  EXPECT_TRUE(h.verifier.released.count(*id));
}

TEST(RouterCoreTest, StaticSpeculationMatchesReferenceAndCountsUsage) {
  Harness h("static:3");
  ASSERT_TRUE(h.core->Init().ok());
  auto id = h.Submit(Prompt(2, 10), 40);
  ASSERT_TRUE(id.ok());
  h.RunUntilIdle();
  const Collected& c = h.out[*id];
  EXPECT_EQ(c.tokens, ReferenceGeneration(Prompt(2, 10), 40));
  const Usage& u = c.final_event.usage;
  EXPECT_GT(u.drafted_tokens, 0);
  EXPECT_GT(u.accepted_tokens, 0);
  EXPECT_LE(u.accepted_tokens, u.drafted_tokens);
  EXPECT_LT(u.steps, 40);  // speculation saved steps
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty()) << h.drafters[0]->protocol_errors[0];
  EXPECT_TRUE(h.verifier.protocol_errors.empty());
  EXPECT_TRUE(h.drafters[0]->released.count(*id));
  ServerInfo info = h.core->Snapshot();
  EXPECT_EQ(info.policy, "static:3");
  EXPECT_GT(info.mean_accept_length, 1.0);
  EXPECT_EQ(info.completed, 1);
}

TEST(RouterCoreTest, ContinuousBatchingJoinsAndLeavesBetweenSteps) {
  Harness h("static:2");
  ASSERT_TRUE(h.core->Init().ok());
  // Requests of different lengths; a fourth arrives while the others run.
  auto a = h.Submit(Prompt(3, 5), 6);
  auto b = h.Submit(Prompt(4, 9), 30);
  auto c = h.Submit(Prompt(5, 7), 15);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  h.core->RunStep();
  h.core->RunStep();
  EXPECT_EQ(h.verifier.batch_sizes.back(), 3);
  int unfinished = 0;
  for (RequestId x : {*a, *b, *c}) unfinished += h.out[x].finished ? 0 : 1;
  auto d = h.Submit(Prompt(6, 4), 20);
  ASSERT_TRUE(d.ok());
  h.core->RunStep();
  // The newcomer joined the running requests in the very next step.
  EXPECT_EQ(h.verifier.batch_sizes.back(), unfinished + 1);
  const size_t joined_at = h.verifier.batch_sizes.size() - 1;
  h.RunUntilIdle();
  // From then on nobody joins: batches only shrink as requests leave.
  for (size_t i = joined_at + 1; i < h.verifier.batch_sizes.size(); ++i) {
    EXPECT_LE(h.verifier.batch_sizes[i], h.verifier.batch_sizes[i - 1]);
  }
  EXPECT_LT(h.verifier.batch_sizes.back(), unfinished + 1);
  EXPECT_EQ(h.out[*a].tokens, ReferenceGeneration(Prompt(3, 5), 6));
  EXPECT_EQ(h.out[*b].tokens, ReferenceGeneration(Prompt(4, 9), 30));
  EXPECT_EQ(h.out[*c].tokens, ReferenceGeneration(Prompt(5, 7), 15));
  EXPECT_EQ(h.out[*d].tokens, ReferenceGeneration(Prompt(6, 4), 20));
}

TEST(RouterCoreTest, AdmissionWaitsForKvBlocks) {
  RouterOptions opt;
  opt.max_k = 3;
  Harness h("none", opt);
  // Each request needs ceil((16 + 12 + 3 + 1) / 16) = 2 blocks; 5 blocks hold two of them.
  h.verifier.total_blocks = 5;
  ASSERT_TRUE(h.core->Init().ok());
  std::vector<RequestId> ids;
  for (int i = 0; i < 3; ++i) {
    auto id = h.Submit(Prompt(10 + i, 16), 12);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  h.core->RunStep();
  ServerInfo info = h.core->Snapshot();
  EXPECT_EQ(info.running, 2);
  EXPECT_EQ(info.queue_depth, 1);
  EXPECT_EQ(info.reserved_blocks, 4);
  EXPECT_EQ(h.verifier.sessions.size(), 2u);
  h.RunUntilIdle();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(h.out[ids[i]].tokens, ReferenceGeneration(Prompt(10 + i, 16), 12));
  }
  EXPECT_EQ(h.core->Snapshot().reserved_blocks, 0);
}

TEST(RouterCoreTest, RequestThatCanNeverFitIsInvalid) {
  Harness h("none");
  h.verifier.total_blocks = 2;
  ASSERT_TRUE(h.core->Init().ok());
  auto id = h.Submit(Prompt(1, 40), 10);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RouterCoreTest, QueueLimitAnswersResourceExhausted) {
  RouterOptions opt;
  opt.max_queue = 2;
  Harness h("none", opt);
  ASSERT_TRUE(h.core->Init().ok());
  EXPECT_TRUE(h.Submit(Prompt(1, 4), 4).ok());
  EXPECT_TRUE(h.Submit(Prompt(2, 4), 4).ok());
  EXPECT_EQ(h.Submit(Prompt(3, 4), 4).status().code(), absl::StatusCode::kResourceExhausted);
  h.core->RunStep();  // both admitted: the queue has room again
  EXPECT_TRUE(h.Submit(Prompt(3, 4), 4).ok());
}

TEST(RouterCoreTest, BadInputIsInvalidArgument) {
  Harness h("none");
  ASSERT_TRUE(h.core->Init().ok());
  EXPECT_EQ(h.Submit({}, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.Submit({1, kFakeVocab}, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.Submit({1, -2}, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.Submit({1, 2}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  GenerateRequest stop;
  stop.stop = {"x"};  // no detokenizer configured
  EXPECT_EQ(h.Submit({1, 2}, 4, stop).status().code(), absl::StatusCode::kInvalidArgument);
  GenerateRequest pool;
  pool.drafter = "nope";
  EXPECT_EQ(h.Submit({1, 2}, 4, pool).status().code(), absl::StatusCode::kInvalidArgument);
  GenerateRequest sampling;
  sampling.sampling.top_p = 0;
  EXPECT_EQ(h.Submit({1, 2}, 4, sampling).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RouterCoreTest, CancelRunningReleasesSessionsOnBothWorkers) {
  Harness h("static:3");
  ASSERT_TRUE(h.core->Init().ok());
  auto id = h.Submit(Prompt(7, 12), 200);
  ASSERT_TRUE(id.ok());
  h.core->RunStep();
  h.core->RunStep();
  ASSERT_TRUE(h.verifier.sessions.count(*id));
  ASSERT_TRUE(h.drafters[0]->sessions.count(*id));
  ASSERT_TRUE(h.core->Cancel(*id).ok());
  h.core->RunStep();
  const Collected& c = h.out[*id];
  EXPECT_TRUE(c.finished);
  EXPECT_EQ(c.final_event.finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(c.final_event.status.code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(h.verifier.sessions.count(*id));
  EXPECT_FALSE(h.drafters[0]->sessions.count(*id));
  EXPECT_TRUE(h.verifier.released.count(*id));
  EXPECT_TRUE(h.drafters[0]->released.count(*id));
  EXPECT_TRUE(h.core->Idle());
  EXPECT_EQ(h.core->Cancel(*id).code(), absl::StatusCode::kNotFound);
}

TEST(RouterCoreTest, CancelQueuedNeverTouchesWorkers) {
  Harness h("static:3");
  ASSERT_TRUE(h.core->Init().ok());
  auto id = h.Submit(Prompt(8, 12), 20);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(h.core->Cancel(*id).ok());
  h.core->RunStep();
  EXPECT_EQ(h.out[*id].final_event.finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(h.verifier.prefill_calls, 0);
  EXPECT_TRUE(h.core->Idle());
}

TEST(RouterCoreTest, DrafterFailureMeansPlainDecodeNotError) {
  Harness h("static:4");
  h.drafters[0]->failures_left = 1000000;
  ASSERT_TRUE(h.core->Init().ok());
  auto id = h.Submit(Prompt(9, 6), 25);
  ASSERT_TRUE(id.ok());
  h.RunUntilIdle();
  const Collected& c = h.out[*id];
  EXPECT_EQ(c.final_event.finish_reason, FinishReason::kLength);
  EXPECT_TRUE(c.final_event.status.ok());
  EXPECT_EQ(c.final_event.usage.drafted_tokens, 0);
  EXPECT_EQ(c.tokens, ReferenceGeneration(Prompt(9, 6), 25));
  EXPECT_GT(h.drafters[0]->calls, 0);
  // The drafter may hold a session from a half-done call: it is released too.
  EXPECT_TRUE(h.drafters[0]->released.count(*id));
}

TEST(RouterCoreTest, DrafterRecoversWithAFullResend) {
  Harness h("static:3");
  ASSERT_TRUE(h.core->Init().ok());
  auto id = h.Submit(Prompt(11, 6), 60);
  ASSERT_TRUE(id.ok());
  for (int i = 0; i < 4; ++i) h.core->RunStep();
  h.drafters[0]->failures_left = 2;
  h.RunUntilIdle();
  EXPECT_EQ(h.out[*id].tokens, ReferenceGeneration(Prompt(11, 6), 60));
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty()) << h.drafters[0]->protocol_errors[0];
  EXPECT_GT(h.out[*id].final_event.usage.drafted_tokens, 0);
}

// With its only verifier failing and no wait allowed, the step's requests fail with
// UNAVAILABLE (never a crash or a hang); once the replica answers its probe again, the router
// releases their stale sessions there and serves new requests.
TEST(RouterCoreTest, VerifierFailureWithNoReplicaLeftFailsCleanly) {
  RouterOptions options;
  options.failover_wait_seconds = 0;
  Harness h("static:2", options);
  ASSERT_TRUE(h.core->Init().ok());
  auto a = h.Submit(Prompt(12, 6), 50);
  auto b = h.Submit(Prompt(13, 6), 50);
  ASSERT_TRUE(a.ok() && b.ok());
  h.core->RunStep();
  h.verifier.fail_verify = true;
  h.RunUntilIdle(10);
  for (RequestId id : {*a, *b}) {
    const Collected& c = h.out[id];
    EXPECT_TRUE(c.finished);
    EXPECT_EQ(c.final_event.finish_reason, FinishReason::kError);
    EXPECT_EQ(c.final_event.status.code(), absl::StatusCode::kUnavailable);
  }
  // The router keeps serving once the verifier is back (after a probe interval).
  h.verifier.fail_verify = false;
  h.clock.Advance(1.0);
  auto c = h.Submit(Prompt(14, 6), 10);
  ASSERT_TRUE(c.ok());
  h.RunUntilIdle();
  EXPECT_EQ(h.out[*c].tokens, ReferenceGeneration(Prompt(14, 6), 10));
  for (RequestId id : {*a, *b}) EXPECT_TRUE(h.verifier.released.count(id));
  EXPECT_TRUE(h.verifier.sessions.empty());
}

// A verifier that fails and comes back within the failover wait: its requests are re-prefilled
// with their whole history and finish with exactly the reference output.
TEST(RouterCoreTest, VerifierFailureWithinTheWaitIsInvisible) {
  Harness h("static:2");
  ASSERT_TRUE(h.core->Init().ok());
  auto a = h.Submit(Prompt(12, 6), 50);
  auto b = h.Submit(Prompt(13, 6), 50);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 3; ++i) h.core->RunStep();
  h.verifier.fail_verify = true;
  h.core->RunStep();
  h.verifier.fail_verify = false;
  h.clock.Advance(1.0);
  h.RunUntilIdle();
  EXPECT_EQ(h.out[*a].tokens, ReferenceGeneration(Prompt(12, 6), 50));
  EXPECT_EQ(h.out[*b].tokens, ReferenceGeneration(Prompt(13, 6), 50));
  EXPECT_EQ(h.out[*a].final_event.finish_reason, FinishReason::kLength);
  EXPECT_TRUE(h.verifier.protocol_errors.empty()) << h.verifier.protocol_errors[0];
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty()) << h.drafters[0]->protocol_errors[0];
  EXPECT_TRUE(h.verifier.sessions.empty());
}

TEST(RouterCoreTest, PrefillFailureWithNoReplicaLeftFailsOnlyThoseRequests) {
  RouterOptions options;
  options.failover_wait_seconds = 0;
  Harness h("none", options);
  ASSERT_TRUE(h.core->Init().ok());
  h.verifier.fail_prefill = true;
  auto a = h.Submit(Prompt(15, 6), 5);
  ASSERT_TRUE(a.ok());
  h.RunUntilIdle(10);
  EXPECT_EQ(h.out[*a].final_event.finish_reason, FinishReason::kError);
  EXPECT_EQ(h.out[*a].final_event.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(h.core->Idle());
}

TEST(RouterCoreTest, EosStopsAndIsNotStreamed) {
  const std::vector<int32_t> ref = ReferenceGeneration(Prompt(16, 6), 30);
  RouterOptions opt;
  opt.eos_token_id = ref[9];
  const size_t first = std::find(ref.begin(), ref.end(), ref[9]) - ref.begin();
  Harness h("static:3", opt);
  ASSERT_TRUE(h.core->Init().ok());
  auto id = h.Submit(Prompt(16, 6), 30);
  ASSERT_TRUE(id.ok());
  h.RunUntilIdle();
  const Collected& c = h.out[*id];
  EXPECT_EQ(c.final_event.finish_reason, FinishReason::kEos);
  EXPECT_EQ(c.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + first));
  EXPECT_EQ(c.final_event.usage.completion_tokens, static_cast<int32_t>(first) + 1);

  // ignore_eos runs to max_tokens.
  GenerateRequest extra;
  extra.ignore_eos = true;
  auto id2 = h.Submit(Prompt(16, 6), 30, extra);
  ASSERT_TRUE(id2.ok());
  h.RunUntilIdle();
  EXPECT_EQ(h.out[*id2].tokens, ref);
}

TEST(RouterCoreTest, StopStringStopsAtTheCompletingToken) {
  const std::vector<int32_t> ref = ReferenceGeneration(Prompt(17, 6), 40);
  RouterOptions opt;
  opt.detokenize = [](absl::Span<const int32_t> t) {
    std::string s;
    for (int32_t x : t) s += "<" + std::to_string(x) + ">";
    return s;
  };
  Harness h("static:4", opt);
  ASSERT_TRUE(h.core->Init().ok());
  GenerateRequest extra;
  // The stop string spans two tokens, so it only appears once the second one is generated.
  const std::string stop = std::to_string(ref[20]) + "><" + std::to_string(ref[21]) + ">";
  extra.stop = {"never-there", stop};
  auto id = h.Submit(Prompt(17, 6), 40, extra);
  ASSERT_TRUE(id.ok());
  h.RunUntilIdle();
  const Collected& c = h.out[*id];
  EXPECT_EQ(c.final_event.finish_reason, FinishReason::kStopString);
  EXPECT_EQ(c.final_event.matched_stop, stop);
  // The first place the stop string completes may be earlier than index 21 if the pattern
  // repeats; compute it from the reference independently.
  std::string text;
  size_t expect_len = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    text += "<" + std::to_string(ref[i]) + ">";
    if (text.find(stop) != std::string::npos) {
      expect_len = i + 1;
      break;
    }
  }
  ASSERT_GT(expect_len, 0u);
  EXPECT_EQ(c.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + expect_len));
}

// defer_token_events: a decode step's tokens for two requests or more reach the sinks while
// the next step's verify call is in flight, so after each step a client holds exactly what it
// would have held one step earlier without deferral; a cancellation delivers the deferred
// tokens before its final event; a step with tokens for one request delivers them at once.
TEST(RouterCoreTest, DeferredStepTokensArriveWithTheNextVerifyCall) {
  for (const bool pipeline : {false, true}) {
    SCOPED_TRACE(pipeline ? "with the pipeline" : "serial");
    RouterOptions at_once_options, deferred_options;
    at_once_options.pipeline = deferred_options.pipeline = pipeline;
    deferred_options.defer_token_events = true;
    Harness at_once("static:3", at_once_options), deferred("static:3", deferred_options);
    ASSERT_TRUE(at_once.core->Init().ok() && deferred.core->Init().ok());
    std::vector<RequestId> a, d;
    for (int32_t seed : {9, 10}) {
      auto ia = at_once.Submit(Prompt(seed, 10), 500);
      auto id = deferred.Submit(Prompt(seed, 10), 500);
      ASSERT_TRUE(ia.ok() && id.ok());
      a.push_back(*ia);
      d.push_back(*id);
    }
    std::vector<std::vector<int32_t>> before(2);  // what `at_once`'s clients held a step earlier
    for (int step = 0; step < 6; ++step) {
      at_once.core->RunStep();
      deferred.core->RunStep();
      for (size_t i = 0; i < 2; ++i) {
        const std::vector<int32_t>& got = deferred.out[d[i]].tokens;
        // The first step's prefill token is no decode step's: it is delivered at once.
        if (step == 0) {
          EXPECT_EQ(got.size(), 1u);
        } else {
          EXPECT_EQ(got, before[i]) << "request " << i << " after step " << step;
        }
        before[i] = at_once.out[a[i]].tokens;
        ASSERT_GT(before[i].size(), got.size()) << "the tokens of the step just run are still held back";
      }
    }
    // One request left: its tokens go out at once.
    ASSERT_TRUE(at_once.core->Cancel(a[1]).ok() && deferred.core->Cancel(d[1]).ok());
    at_once.core->RunStep();
    deferred.core->RunStep();
    EXPECT_TRUE(deferred.out[d[1]].finished);
    EXPECT_EQ(deferred.out[d[1]].final_event.finish_reason, FinishReason::kCancelled);
    EXPECT_EQ(deferred.out[d[1]].tokens, at_once.out[a[1]].tokens);
    at_once.core->RunStep();
    deferred.core->RunStep();
    EXPECT_EQ(deferred.out[d[0]].tokens, at_once.out[a[0]].tokens);
    ASSERT_TRUE(at_once.core->Cancel(a[0]).ok() && deferred.core->Cancel(d[0]).ok());
    at_once.core->RunStep();
    deferred.core->RunStep();
    EXPECT_EQ(deferred.out[d[0]].tokens, at_once.out[a[0]].tokens);
    const std::vector<int32_t> reference = ReferenceGeneration(Prompt(9, 10), 500);
    const std::vector<int32_t>& got = deferred.out[d[0]].tokens;
    ASSERT_LE(got.size(), reference.size());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), reference.begin()));
    EXPECT_TRUE(deferred.core->Idle());
  }
}

// A verifier client that overlaps the router's side work with its call (a step socket: send,
// work, read) takes the side thread's place: one request's tokens are deferred too, reach the
// sink inside the next verify call on the loop thread, and none is lost or repeated.
TEST(RouterCoreTest, ASingleRequestsTokensRideTheNextCallOfAnOverlappingVerifier) {
  RouterOptions at_once_options, overlap_options;
  overlap_options.defer_token_events = true;
  Harness at_once("static:3", at_once_options), overlap("static:3", overlap_options);
  overlap.verifier.overlaps_work = true;
  ASSERT_TRUE(at_once.core->Init().ok() && overlap.core->Init().ok());
  auto a = at_once.Submit(Prompt(9, 10), 40);
  auto o = overlap.Submit(Prompt(9, 10), 40);
  ASSERT_TRUE(a.ok() && o.ok());
  std::vector<int32_t> before;  // what `at_once`'s client held a step earlier
  for (int step = 0; step < 4; ++step) {
    at_once.core->RunStep();
    overlap.core->RunStep();
    const std::vector<int32_t>& got = overlap.out[*o].tokens;
    if (step == 0) {
      EXPECT_EQ(got.size(), 1u);  // the prefill's token is no decode step's
    } else {
      EXPECT_EQ(got, before) << "after step " << step;
    }
    before = at_once.out[*a].tokens;
    ASSERT_GT(before.size(), got.size()) << "the tokens of the step just run are still held back";
  }
  overlap.RunUntilIdle();
  at_once.RunUntilIdle();
  EXPECT_EQ(overlap.out[*o].tokens, ReferenceGeneration(Prompt(9, 10), 40));
  EXPECT_EQ(overlap.out[*o].tokens, at_once.out[*a].tokens);
  EXPECT_GT(overlap.verifier.work_in_calls, 0);
  EXPECT_EQ(overlap.verifier.work_threads, std::set<std::thread::id>{std::this_thread::get_id()})
      << "the side work runs on the loop thread, inside the call";
  EXPECT_EQ(at_once.verifier.work_in_calls, 0);
}

// defer_step_reports: a decode step's report (the step observer, the snapshot) is made inside
// the next step's verify call, while it is in flight, and the step the loop runs without a
// decode step reports the last one; the reports are the same, in the same order, as when each
// is made at the end of its own step.
TEST(RouterCoreTest, StepReportsHeldBackComeInsideTheNextVerifyCallInOrder) {
  struct Report {
    StepStats stats;
    bool inside_a_call = false;
  };
  std::vector<Report> at_once_reports, held_reports;
  Harness* at_once_harness = nullptr;
  Harness* held_harness = nullptr;
  const auto inside_a_call = [](const Harness* h) { return h->verifier.in_flight; };
  RouterOptions at_once_options, held_options;
  at_once_options.step_observer = [&](const StepStats& s) {
    at_once_reports.push_back({s, inside_a_call(at_once_harness)});
  };
  held_options.defer_step_reports = true;
  held_options.step_observer = [&](const StepStats& s) { held_reports.push_back({s, inside_a_call(held_harness)}); };
  Harness at_once("static:3", at_once_options), held("static:3", held_options);
  at_once_harness = &at_once;
  held_harness = &held;
  at_once.verifier.overlaps_work = held.verifier.overlaps_work = true;
  ASSERT_TRUE(at_once.core->Init().ok() && held.core->Init().ok());
  ASSERT_TRUE(at_once.Submit(Prompt(5, 10), 40).ok() && held.Submit(Prompt(5, 10), 40).ok());
  for (int run = 0; run < 200 && !held.core->Idle(); ++run) {
    at_once.core->RunStep();
    held.core->RunStep();
    // Every run here decodes: its own report is made at its end, or held back until the next.
    const size_t decoded = static_cast<size_t>(at_once.core->Snapshot().steps);
    EXPECT_EQ(at_once_reports.size(), decoded);
    EXPECT_EQ(held_reports.size(), decoded - 1);
  }
  EXPECT_TRUE(at_once.core->Idle());
  EXPECT_EQ(held.out.begin()->second.tokens, ReferenceGeneration(Prompt(5, 10), 40));
  // The loop's next run has no decode step: it reports the last one.
  held.core->RunStep();
  ASSERT_EQ(held_reports.size(), at_once_reports.size());
  ASSERT_GT(held_reports.size(), 3u);
  for (size_t i = 0; i < held_reports.size(); ++i) {
    const StepStats& a = at_once_reports[i].stats;
    const StepStats& h = held_reports[i].stats;
    EXPECT_EQ(h.step, a.step) << "report " << i;
    EXPECT_EQ(h.k, a.k) << "report " << i;
    EXPECT_EQ(h.accepted_tokens, a.accepted_tokens) << "report " << i;
    EXPECT_EQ(h.emitted_tokens, a.emitted_tokens) << "report " << i;
    // What the step's decision expected, priced when it is reported, from the estimates it
    // decided with (the fakes report no timings, so the latency model does not move).
    EXPECT_GT(a.estimated_goodput, 0.0) << "report " << i;
    EXPECT_DOUBLE_EQ(h.estimated_goodput, a.estimated_goodput) << "report " << i;
    EXPECT_FALSE(at_once_reports[i].inside_a_call) << "report " << i;
    EXPECT_EQ(held_reports[i].inside_a_call, i + 1 < held_reports.size()) << "report " << i;
  }
  EXPECT_EQ(held.core->Snapshot().steps, at_once.core->Snapshot().steps);
}

// Greedy correctness: whatever a policy asks for and whatever the drafter guesses, the
// output is exactly the target's greedy sequence.
class GreedyCorrectnessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GreedyCorrectnessTest, OutputIsTheTargetSequence) {
  nlohmann::json config = nlohmann::json::object();
  std::string name = GetParam();
  if (name == "smartspec-request") {
    name = "smartspec";
    config["granularity"] = "request";
  }
  if (name == "sglang-tiers") config = {{"warmup_batches", 2}, {"update_interval", 2}};
  // With the step's tokens handed over at once, deferred to the next verify call, and deferred
  // into a verifier client that runs the side work inside its call.
  for (const int mode : {0, 1, 2}) {
    const bool defer = mode > 0;
    SCOPED_TRACE(mode == 0 ? "token events at once" : mode == 1 ? "deferred token events" : "work inside the call");
    RouterOptions opt;
    opt.max_k = 6;
    opt.defer_token_events = defer;
    Harness h(name, opt, config, /*n_drafters=*/2);
    h.verifier.overlaps_work = mode == 2;
    ASSERT_TRUE(h.core->Init().ok());
    std::vector<std::pair<RequestId, std::vector<int32_t>>> expected;
    for (int i = 0; i < 8; ++i) {
      const int32_t len = 3 + (i * 7) % 20, n = 10 + (i * 13) % 50;
      auto id = h.Submit(Prompt(100 + i, len), n);
      ASSERT_TRUE(id.ok());
      expected.push_back({*id, ReferenceGeneration(Prompt(100 + i, len), n)});
      if (i % 3 == 0) h.core->RunStep();  // staggered arrivals
    }
    h.RunUntilIdle();
    for (const auto& [id, ref] : expected) {
      EXPECT_EQ(h.out[id].tokens, ref) << "request " << id;
      EXPECT_EQ(h.out[id].final_event.finish_reason, FinishReason::kLength);
      EXPECT_EQ(h.out[id].final_event.usage.completion_tokens, static_cast<int32_t>(ref.size()));
    }
    for (const auto& d : h.drafters) {
      EXPECT_TRUE(d->protocol_errors.empty()) << d->protocol_errors[0];
    }
    EXPECT_TRUE(h.verifier.protocol_errors.empty());
    EXPECT_TRUE(h.verifier.sessions.empty());
    for (const auto& d : h.drafters) EXPECT_TRUE(d->sessions.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, GreedyCorrectnessTest,
                         ::testing::Values("none", "static:1", "static:5", "smartspec",
                                           "smartspec-request", "sglang-tiers", "analytical",
                                           "fsm", "cache-fsm"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace_if(s.begin(), s.end(),
                                           [](char c) { return !isalnum(c); }, '_');
                           return s;
                         });

TEST(RouterCoreTest, PoolSelectionPrefersTheMoreAccurateDrafter) {
  RouterOptions opt;
  opt.max_k = 4;
  opt.pool_selection.explore_observations = 8;
  Harness h("static:4", opt, nlohmann::json::object(), 0);
  h.drafters.push_back(std::make_unique<FakeDrafter>(0.95, 7));
  h.drafters.push_back(std::make_unique<FakeDrafter>(0.05, 8));
  h.pool_names = {"good", "poor"};
  h.Build("static:4", opt, nlohmann::json::object());
  ASSERT_TRUE(h.core->Init().ok());
  for (int i = 0; i < 30; ++i) {
    auto id = h.Submit(Prompt(200 + i, 8), 30);
    ASSERT_TRUE(id.ok());
    h.RunUntilIdle();
    EXPECT_EQ(h.out[*id].tokens, ReferenceGeneration(Prompt(200 + i, 8), 30));
  }
  // Both pools got explored, and the accurate one did most of the drafting.
  EXPECT_GT(h.drafters[1]->tokens_proposed, 0);
  EXPECT_GT(h.drafters[0]->tokens_proposed, 3 * h.drafters[1]->tokens_proposed);
  ServerInfo info = h.core->Snapshot();
  EXPECT_GT(info.mean_accept_length_by_pool["good"], info.mean_accept_length_by_pool["poor"]);
}

TEST(RouterCoreTest, SmartSpecDisablesDrafterPrefillWhenSpeculationNeverPays) {
  // With an absurdly expensive drafter goodput always picks k = 0, so after the window fills
  // new requests are admitted non-speculative and never reach the drafter. (The first one,
  // admitted before anything was judged, is speculative: its drafter prefills it.)
  Harness h("smartspec", RouterOptions{}, {{"prefill_window", 4}});
  LatencyModel expensive;
  expensive.set_drafter("pool0", DrafterCost{false, {0, 0, 10.0}, 0});
  auto p = MakePolicy("smartspec", {{"prefill_window", 4}});
  ASSERT_TRUE(p.ok());
  h.core = std::make_unique<RouterCore>(RouterOptions{}, &h.verifier,
                                        DrafterPools{{"pool0", h.drafters[0].get()}},
                                        std::move(*p), expensive, &h.clock);
  ASSERT_TRUE(h.core->Init().ok());
  auto first = h.Submit(Prompt(300, 8), 20);
  ASSERT_TRUE(first.ok());
  h.RunUntilIdle();
  auto second = h.Submit(Prompt(301, 8), 20);
  ASSERT_TRUE(second.ok());
  h.RunUntilIdle();
  EXPECT_EQ(h.out[*second].tokens, ReferenceGeneration(Prompt(301, 8), 20));
  EXPECT_EQ(h.drafters[0]->proposed_ids.count(*second), 0u);
  EXPECT_GT(h.core->Snapshot().policy_state["disabled_prefills"].get<int64_t>(), 0);
  EXPECT_EQ(h.core->Snapshot().policy_state["resumed_requests"].get<int64_t>(), 0);
}

// After a stretch where drafting did not pay, smartspec must be able to draft again once its
// steady state says it pays. Here the first request's drafter misses every guess, so smartspec
// stops drafting; the pool's estimate then goes stale and relaxes to the prior, at which chains
// pay every step, and the drafter now lands every guess. A later request must draft: admitted
// speculative (the prefill-disabling share counts what drafting would pay every step, not the
// first request's k = 0, which only its catch-up priced out) and with its drafter prefilled
// beside the verifier (otherwise its whole prompt to catch up prices every chain out, it never
// drafts, and neither does any request after it). Output is the target's throughout.
TEST(RouterCoreTest, SmartSpecDraftsAgainAfterAStretchWithoutDrafting) {
  LatencyModel model;
  model.set_target(ForwardCoefficients{0.0, 0.0005, 0.004});
  model.set_drafter("pool0", DrafterCost{false, ForwardCoefficients{0.0, 0.0002, 0.0002}, 0});
  Harness h("smartspec");
  h.drafters[0]->set_accuracy(0.0);
  // Chains only: trees have estimates of their own, whose drafts would keep measuring the pool.
  auto p = MakePolicy("smartspec", {{"trees", false}});
  ASSERT_TRUE(p.ok());
  h.core = std::make_unique<RouterCore>(RouterOptions{}, &h.verifier, DrafterPools{{"pool0", h.drafters[0].get()}},
                                        std::move(*p), model, &h.clock);
  ASSERT_TRUE(h.core->Init().ok());
  auto first = h.Submit(Prompt(330, 300), 80);
  ASSERT_TRUE(first.ok());
  h.RunUntilIdle();
  EXPECT_EQ(h.out[*first].tokens, ReferenceGeneration(Prompt(330, 300), 80));
  const Usage& missed = h.out[*first].final_event.usage;
  EXPECT_EQ(missed.accepted_tokens, 0);
  // It stopped drafting: most of its steps drafted nothing.
  EXPECT_LT(missed.drafted_tokens, missed.steps / 2) << h.core->Snapshot().policy_state.dump();

  h.drafters[0]->set_accuracy(1.0);
  for (int32_t seed : {331, 332}) {
    auto next = h.Submit(Prompt(seed, 300), 40);
    ASSERT_TRUE(next.ok());
    h.RunUntilIdle();
    EXPECT_EQ(h.out[*next].tokens, ReferenceGeneration(Prompt(seed, 300), 40));
    const Usage& usage = h.out[*next].final_event.usage;
    EXPECT_GE(usage.accepted_tokens, usage.completion_tokens / 4)
        << "request " << seed << ": " << h.core->Snapshot().policy_state.dump();
  }
  EXPECT_TRUE(h.drafters[0]->protocol_errors.empty());
}

// A drafter that lands every guess but whose forwards cost a third of the target's: at the
// estimators' prior every chain prices out, so without exploring smartspec never drafts; with
// it, chains of one measure the pool and longer chains follow. Output is the target's.
TEST(RouterCoreTest, SmartSpecExploresAnUnmeasuredDrafterAndThenDraftsLongerChains) {
  LatencyModel costly;
  costly.set_target(ForwardCoefficients{0.0, 0.0007, 0.003});
  costly.set_drafter("pool0", DrafterCost{false, ForwardCoefficients{0.0, 0.0005, 0.0008}, 0});
  auto run = [&](const nlohmann::json& config) {
    Harness h("smartspec");
    h.drafters[0]->set_accuracy(1.0);
    auto p = MakePolicy("smartspec", config);
    EXPECT_TRUE(p.ok());
    h.core = std::make_unique<RouterCore>(RouterOptions{}, &h.verifier,
                                          DrafterPools{{"pool0", h.drafters[0].get()}}, std::move(*p), costly,
                                          &h.clock);
    EXPECT_TRUE(h.core->Init().ok());
    auto id = h.Submit(Prompt(320, 8), 60);
    EXPECT_TRUE(id.ok());
    h.RunUntilIdle();
    EXPECT_EQ(h.out[*id].tokens, ReferenceGeneration(Prompt(320, 8), 60));
    EXPECT_TRUE(h.drafters[0]->protocol_errors.empty());
    return h.core->Snapshot().policy_state;
  };
  const nlohmann::json exploring = run(nlohmann::json::object());
  EXPECT_GE(exploring["explored_request_steps"].get<int64_t>(), 1) << exploring.dump();
  int64_t longer = 0;
  for (const auto& [k, n] : exploring["k_histogram"].items()) {
    if (std::stoi(k) >= 2) longer += n.get<int64_t>();
  }
  EXPECT_GT(longer, 0) << exploring.dump();
  const nlohmann::json not_exploring = run({{"explore_verifications", 0}});
  EXPECT_EQ(not_exploring["explored_request_steps"].get<int64_t>(), 0);
  for (const auto& [k, n] : not_exploring["k_histogram"].items()) {
    EXPECT_EQ(k, "0") << not_exploring.dump();
  }
}

// A request admitted non-speculative during another's low-acceptance streak drafts again once
// speculation would pay: its drafter session is then built from its whole history (the fake
// drafter checks it sees exactly the verifier's committed state) and its output is unchanged.
TEST(RouterCoreTest, SmartSpecLetsARequestAdmittedWithoutDraftingResumeWhenSpeculationPaysAgain) {
  Harness h("smartspec", RouterOptions{}, {{"prefill_window", 4}});
  ASSERT_TRUE(h.core->Init().ok());
  FakeDrafter& drafter = *h.drafters[0];
  drafter.set_accuracy(0.0);  // every guess wrong: goodput proposes nothing
  auto first = h.Submit(Prompt(310, 8), 40);
  ASSERT_TRUE(first.ok());
  h.RunUntilIdle();
  drafter.set_accuracy(0.9);
  auto second = h.Submit(Prompt(311, 8), 80);
  ASSERT_TRUE(second.ok());
  h.RunUntilIdle();
  const nlohmann::json state = h.core->Snapshot().policy_state;
  EXPECT_EQ(state["disabled_prefills"].get<int64_t>(), 1) << state.dump();
  EXPECT_EQ(state["resumed_requests"].get<int64_t>(), 1) << state.dump();
  EXPECT_TRUE(drafter.proposed_ids.count(*second));
  EXPECT_TRUE(h.verifier.saw_draft_ids.count(*second));
  EXPECT_TRUE(drafter.protocol_errors.empty()) << drafter.protocol_errors.front();
  EXPECT_EQ(h.out[*second].tokens, ReferenceGeneration(Prompt(311, 8), 80));
}

// The router compares each shape smartspec chose with what its steps emitted; a policy that
// states no expectation (static) leaves the table empty.
TEST(RouterCoreTest, ShapeCalibrationComparesTheChosenShapesWithTheirSteps) {
  for (const char* policy : {"smartspec", "static:3"}) {
    Harness h(policy);
    ASSERT_TRUE(h.core->Init().ok());
    for (int i = 0; i < 4; ++i) {
      const auto id = h.Submit(Prompt(400 + i, 8), 40);
      ASSERT_TRUE(id.ok()) << id.status();
    }
    h.RunUntilIdle();
    const nlohmann::json table = h.core->Snapshot().policy_state["shape_calibration"];
    if (std::string(policy) == "static:3") {
      EXPECT_TRUE(table.empty()) << table.dump();
      continue;
    }
    ASSERT_TRUE(table.contains("pool0")) << table.dump();
    double steps = 0;
    for (const auto& [shape, row] : table["pool0"].items()) {
      const double max_tokens = 1 + std::stoi(shape);  // a chain or tree of depth d: d + 1 at most
      EXPECT_GE(row["expected"].get<double>(), 1.0) << shape;
      EXPECT_LE(row["expected"].get<double>(), max_tokens + 1e-9) << shape;
      EXPECT_GE(row["observed"].get<double>(), 1.0) << shape;
      EXPECT_LE(row["observed"].get<double>(), max_tokens + 1e-9) << shape;
      steps += row["steps"].get<double>();
    }
    EXPECT_GT(steps, 10.0);
  }
}

// Submitters and cancellers on other threads while the loop thread steps (run under TSan).
TEST(RouterCoreTest, ConcurrentSubmitAndCancel) {
  FakeVerifier verifier;
  FakeDrafter drafter;
  SteadyClock clock;
  auto p = MakePolicy("static:2", nlohmann::json::object());
  ASSERT_TRUE(p.ok());
  RouterCore core(RouterOptions{}, &verifier, {{"d", &drafter}}, std::move(*p), LatencyModel(),
                  &clock);
  ASSERT_TRUE(core.Init().ok());
  std::mutex mu;  // std::, not absl::: TSan sees through pthread (see router/mutex.h)
  std::condition_variable done;
  int finished = 0;
  std::map<RequestId, std::vector<int32_t>> tokens;
  std::atomic<bool> stop{false};
  std::thread loop([&] {
    while (!stop.load()) {
      if (!core.RunStep()) core.WaitForWork(absl::Milliseconds(5));
    }
  });
  constexpr int kThreads = 4, kPerThread = 10;
  std::vector<std::thread> clients;
  std::vector<std::vector<std::pair<RequestId, int32_t>>> submitted(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int seed = t * 100 + i;
        GenerateRequest r;
        r.prompt = Prompt(seed, 5);
        r.max_tokens = 8 + i;
        auto id = core.Submit(r, [&](const StreamEvent& e) {
          std::lock_guard<std::mutex> lock(mu);
          auto& v = tokens[e.id];
          v.insert(v.end(), e.tokens.begin(), e.tokens.end());
          if (e.finished && ++finished == kThreads * kPerThread) done.notify_all();
        });
        ASSERT_TRUE(id.ok());
        submitted[t].push_back({*id, seed});
        if (i % 4 == 3) (void)core.Cancel(*id);  // may race with completion: both fine
      }
    });
  }
  for (auto& c : clients) c.join();
  {
    std::unique_lock<std::mutex> lock(mu);
    done.wait(lock, [&] { return finished == kThreads * kPerThread; });
  }
  stop = true;
  loop.join();
  std::lock_guard<std::mutex> lock(mu);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const auto [id, seed] = submitted[t][i];
      const auto ref = ReferenceGeneration(Prompt(seed, 5), 8 + i);
      const auto& got = tokens[id];
      // Cancelled ones stop early but never stream a wrong token.
      ASSERT_LE(got.size(), ref.size());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), ref.begin()));
      if (i % 4 != 3) {
        EXPECT_EQ(got, ref);
      }
    }
  }
  EXPECT_TRUE(verifier.sessions.empty());
  EXPECT_TRUE(drafter.sessions.empty());
}

// A step's overhead leaves out the compute it waited for: fakes whose calls take exactly the
// compute they report (the virtual clock moves by it) leave a serial speculative step none,
// where "wall minus the slower side" would count the drafter's 3 ms.
TEST(RouterCoreTest, StepOverheadLeavesOutTheSerialDraftersCompute) {
  RouterOptions options;
  options.pipeline = false;
  Harness h("static:3", options);
  h.verifier.compute_seconds = 0.005;
  h.verifier.clock = &h.clock;
  h.drafters[0]->seconds_per_level = 0.001;
  h.drafters[0]->clock = &h.clock;
  ASSERT_TRUE(h.core->Init().ok());
  ASSERT_TRUE(h.Submit(Prompt(3, 9), 40).ok());
  h.RunUntilIdle();
  const ServerInfo info = h.core->Snapshot();
  ASSERT_GT(info.steps, 4);
  EXPECT_NEAR(info.overhead_p50_us, 0.0, 1e-3);
  EXPECT_NEAR(info.overhead_p99_us, 0.0, 1e-3);
}

// A serial step's overhead splits into the router's own time and the calls' time beyond the
// workers' compute: fakes whose calls also take unreported transport time (the virtual clock
// moves by it) and a router whose own work takes none give router 0 and all the overhead to the
// calls.
TEST(RouterCoreTest, RouterTimeLeavesOutTheWorkersCalls) {
  std::vector<StepStats> steps;
  RouterOptions options;
  options.pipeline = false;
  options.step_observer = [&steps](const StepStats& s) { steps.push_back(s); };
  Harness h("static:3", options);
  h.verifier.compute_seconds = 0.005;
  h.verifier.transport_seconds = 0.0002;
  h.verifier.clock = &h.clock;
  h.drafters[0]->seconds_per_level = 0.001;
  h.drafters[0]->transport_seconds = 0.0003;
  h.drafters[0]->clock = &h.clock;
  ASSERT_TRUE(h.core->Init().ok());
  ASSERT_TRUE(h.Submit(Prompt(3, 9), 40).ok());
  h.RunUntilIdle();
  int drafted_steps = 0;
  for (const StepStats& s : steps) {
    EXPECT_NEAR(s.router_seconds, 0.0, 1e-9);
    const bool drafted = s.draft_seconds > 0;
    drafted_steps += drafted ? 1 : 0;
    EXPECT_NEAR(s.rpc_overhead_seconds, drafted ? 0.0005 : 0.0002, 1e-9);
    EXPECT_NEAR(s.overhead_seconds, s.rpc_overhead_seconds + s.router_seconds, 1e-9);
  }
  EXPECT_GT(drafted_steps, 4);
}

// Delegates to static:3, and takes `seconds` of the router's (virtual) time to decide and
// `observe_seconds` to observe a step (which the router does after the step's wall time).
class SlowPlanningPolicy : public SpeculationPolicy {
 public:
  SlowPlanningPolicy(VirtualClock* clock, double seconds, double observe_seconds = 0)
      : inner_(*MakePolicy("static:3", nlohmann::json::object())),
        clock_(clock),
        seconds_(seconds),
        observe_seconds_(observe_seconds) {}
  std::string Name() const override { return "slow-planning"; }
  std::vector<int32_t> Decide(const PolicyInput& input) override { return inner_->Decide(input); }
  std::vector<ProposalChoice> DecideProposals(const PolicyInput& input) override {
    clock_->Advance(seconds_);
    return inner_->DecideProposals(input);
  }
  void Observe(const StepOutcome& outcome) override {
    clock_->Advance(observe_seconds_);
    inner_->Observe(outcome);
  }
  nlohmann::json Describe() const override { return inner_->Describe(); }

 private:
  std::unique_ptr<SpeculationPolicy> inner_;
  VirtualClock* clock_;
  double seconds_;
  double observe_seconds_;
};

// A serial router over timed fakes on a virtual clock (verify 5 ms of compute + 0.2 ms of
// transport, drafting 1 ms a level) whose policy takes plan_seconds to decide and
// observe_seconds to observe; every step's stats are kept.
struct SlowPolicyRouter {
  SlowPolicyRouter(double plan_seconds, double observe_seconds) {
    RouterOptions options;
    options.pipeline = false;
    options.step_observer = [this](const StepStats& s) { steps.push_back(s); };
    verifier.compute_seconds = 0.005;
    verifier.transport_seconds = 0.0002;
    verifier.clock = &clock;
    drafter.verifier = &verifier;
    drafter.seconds_per_level = 0.001;
    drafter.clock = &clock;
    core = std::make_unique<RouterCore>(options, &verifier, DrafterPools{{"d", &drafter}},
                                        std::make_unique<SlowPlanningPolicy>(&clock, plan_seconds, observe_seconds),
                                        LatencyModel(), &clock);
  }

  // Runs one 30-token request to its end; returns the index of its first step in `steps`.
  size_t RunRequest() {
    GenerateRequest r;
    r.prompt = Prompt(3, 9);
    r.max_tokens = 30;
    bool finished = false;
    const size_t first_step = steps.size();
    EXPECT_TRUE(core->Submit(r, [&finished](const StreamEvent& e) { finished = finished || e.finished; }).ok());
    for (int i = 0; i < 200 && !finished; ++i) core->RunStep();
    EXPECT_TRUE(finished);
    return first_step;
  }

  std::vector<StepStats> steps;
  VirtualClock clock;
  FakeVerifier verifier;
  FakeDrafter drafter;
  std::unique_ptr<RouterCore> core;
};

TEST(RouterCoreTest, RouterTimeCountsThePlanning) {
  SlowPolicyRouter router(/*plan_seconds=*/0.0004, /*observe_seconds=*/0.0);
  ASSERT_TRUE(router.core->Init().ok());
  router.RunRequest();
  ASSERT_GT(router.steps.size(), 4u);
  for (const StepStats& s : router.steps) {
    EXPECT_NEAR(s.router_seconds, 0.0004, 1e-9);
    EXPECT_NEAR(s.schedule_seconds, 0.0004, 1e-9);
    EXPECT_NEAR(s.overhead_seconds, 0.0004 + 0.0002, 1e-9);
  }
}

// The router's work after a step's wall time (here the policy observing it, 0.3 ms) counts
// in the next step's overhead when the two run back to back, and an idle wait between two
// requests does not.
TEST(RouterCoreTest, OverheadCountsTheRoutersWorkBetweenBackToBackSteps) {
  SlowPolicyRouter router(/*plan_seconds=*/0.0, /*observe_seconds=*/0.0003);
  ASSERT_TRUE(router.core->Init().ok());
  const size_t first_request_steps = router.RunRequest();
  // Idle: runs without work, and a second of nothing before the next request.
  EXPECT_FALSE(router.core->RunStep());
  router.clock.Advance(1.0);
  EXPECT_FALSE(router.core->RunStep());
  const size_t second_request_steps = router.RunRequest();
  const std::vector<StepStats>& steps = router.steps;
  ASSERT_GT(second_request_steps - first_request_steps, 4u);
  ASSERT_GT(steps.size() - second_request_steps, 4u);
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepStats& s = steps[i];
    // A request's first step follows its prefill run, or an idle wait: nothing before it counts.
    const bool first_of_request = i == first_request_steps || i == second_request_steps;
    const double between = first_of_request ? 0.0 : 0.0003;
    EXPECT_NEAR(s.between_steps_seconds, between, 1e-9) << "step " << i;
    EXPECT_NEAR(s.router_seconds, between, 1e-9) << "step " << i;
    EXPECT_NEAR(s.overhead_seconds, s.rpc_overhead_seconds + between, 1e-9) << "step " << i;
  }
}

TEST(RouterCoreTest, StepOverheadCountsTheSlowerOfVerifyAndTheDraftMadeAhead) {
  // Verify 5 ms beside a 7 ms draft made ahead, in a 7.1 ms step: 0.1 ms of overhead.
  EXPECT_NEAR(StepOverheadSeconds(0.0071, 0.0, 0.005, 0.007), 0.0001, 1e-12);
  // A draft made ahead inside the verify call costs the step nothing beyond it.
  EXPECT_NEAR(StepOverheadSeconds(0.0052, 0.0, 0.005, 0.002), 0.0002, 1e-12);
  // A serial Propose (after a dropped draft) comes before both.
  EXPECT_NEAR(StepOverheadSeconds(0.0093, 0.003, 0.005, 0.006), 0.0003, 1e-12);
}

}  // namespace
}  // namespace splitspec::router::testing
