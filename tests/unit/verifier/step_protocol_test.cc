// The tensor-parallel verifier's step protocol below the verifier core: the wire format refuses
// every malformed payload, the channel carries messages in order and detects a rank that is out
// of step, a replica's steps commit and abort exactly, the replicas' load vote fails every rank
// together, and a leader/follower pair over the in-process communicator returns the same logits
// as one unsharded replica.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "common/engine/comm/in_process_communicator.h"
#include "tests/unit/verifier/test_models.h"
#include "tests/unit/verifier/tp_test_util.h"
#include "verifier/step_channel.h"
#include "verifier/tp_group.h"
#include "verifier/tp_step.h"
#include "verifier/verifier_replica.h"

namespace splitspec::verifier {
namespace {

using splitspec::testing::GetTestModels;
using testing::ExpectLockstep;
using testing::RunWithDeadline;
using testing::StepRecorder;

// Sharding re-associates float sums (see tests/unit/tp/tp_forward_test.cc): ~1e-6 of the
// logits' scale; a wrong split moves logits by O(1).
constexpr float kRelativeTolerance = 5e-5f;

StepMessage SampleVerify() {
  StepMessage m;
  m.kind = StepKind::kVerify;
  m.steps.push_back({7, {1, 2, 3}, {-1, 0, 0}, {}});
  m.steps.push_back({(uint64_t{1} << 40) + 3, {42}, {}, {}});
  return m;
}

TEST(StepWireTest, EveryKindRoundTrips) {
  StepMessage commit;
  commit.kind = StepKind::kCommit;
  commit.commits = {{7, 10, {0, 2}}, {9, 0, {0}}};
  StepMessage release;
  release.kind = StepKind::kRelease;
  release.ids = {3, uint64_t{1} << 63};
  StepMessage prefill;
  prefill.kind = StepKind::kPrefill;
  prefill.steps.push_back({5, {9, 8, 7, 6}, {}, {}});
  for (const StepMessage& m :
       {SampleVerify(), commit, release, prefill, StepMessage{StepKind::kAbort, {}, {}, {}},
        StepMessage{StepKind::kShutdown, {}, {}, {}}}) {
    auto decoded = DecodePayload(m.kind, EncodePayload(m));
    ASSERT_TRUE(decoded.ok()) << StepKindName(m.kind) << ": " << decoded.status();
    EXPECT_EQ(decoded->kind, m.kind);
    ASSERT_EQ(decoded->steps.size(), m.steps.size());
    for (size_t i = 0; i < m.steps.size(); ++i) {
      EXPECT_EQ(decoded->steps[i].seq, m.steps[i].seq);
      EXPECT_EQ(decoded->steps[i].tokens, m.steps[i].tokens);
      EXPECT_EQ(decoded->steps[i].parents, m.steps[i].parents);
      EXPECT_TRUE(decoded->steps[i].logit_nodes.empty());
    }
    EXPECT_EQ(decoded->commits, m.commits);
    EXPECT_EQ(decoded->ids, m.ids);
  }
}

TEST(StepWireTest, MalformedPayloadsAreErrorsNotCrashes) {
  const std::vector<uint8_t> good = EncodePayload(SampleVerify());
  // Every truncation, and trailing bytes.
  for (size_t n = 0; n < good.size(); ++n) {
    auto decoded = DecodePayload(StepKind::kVerify, absl::MakeConstSpan(good.data(), n));
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument) << n << " bytes";
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_EQ(DecodePayload(StepKind::kVerify, longer).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A count far beyond the bytes present must not allocate it.
  std::vector<uint8_t> huge(4 + 16, 0);
  const uint32_t count = 0xffffffffu;
  std::memcpy(huge.data(), &count, 4);
  EXPECT_EQ(DecodePayload(StepKind::kCommit, huge).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodePayload(StepKind::kRelease, huge).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodePayload(static_cast<StepKind>(99), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodePayload(StepKind::kAbort, longer).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Two ranks on CPU backends: rank 0 sends, rank 1 receives, over the in-process communicator.
TEST(StepChannelTest, CarriesMessagesInOrderAndDetectsARankOutOfStep) {
  RunWithDeadline([] {
    auto comms = engine::CreateInProcessGroup(2);
    ASSERT_TRUE(comms.ok());
    std::unique_ptr<engine::Backend> backend0 = engine::CreateCpuBackend({1});
    std::unique_ptr<engine::Backend> backend1 = engine::CreateCpuBackend({1});
    // A payload of several staging rows (1 KiB each), to cover the staging buffer growing.
    StepMessage big;
    big.kind = StepKind::kPrefill;
    big.steps.push_back({1, std::vector<int32_t>(3000, 5), {}, {}});
    std::vector<StepMessage> received;
    absl::Status out_of_step;
    std::thread follower([&] {
      StepChannel channel(*backend1, *(*comms)[1]);
      for (int i = 0; i < 3; ++i) {
        auto m = channel.Receive();
        ASSERT_TRUE(m.ok()) << m.status();
        received.push_back(*m);
      }
      // A second channel has not seen the first three messages: its next header is "out of step".
      StepChannel fresh(*backend1, *(*comms)[1]);
      out_of_step = fresh.Receive().status();
    });
    StepChannel channel(*backend0, *(*comms)[0]);
    EXPECT_EQ(channel.Receive().status().code(), absl::StatusCode::kFailedPrecondition);
    ASSERT_TRUE(channel.Send(SampleVerify()).ok());
    ASSERT_TRUE(channel.Send(big).ok());
    ASSERT_TRUE(channel.Send(StepMessage{StepKind::kRelease, {}, {}, {9, 10}}).ok());
    // An empty payload: the out-of-step follower stops after the header without another broadcast.
    ASSERT_TRUE(channel.Send(StepMessage{StepKind::kAbort, {}, {}, {}}).ok());
    follower.join();
    ASSERT_EQ(received.size(), 3u);
    EXPECT_EQ(received[0].steps[1].seq, SampleVerify().steps[1].seq);
    EXPECT_EQ(received[1].steps[0].tokens, big.steps[0].tokens);
    EXPECT_EQ(received[2].ids, std::vector<engine::SeqId>({9, 10}));
    EXPECT_EQ(out_of_step.code(), absl::StatusCode::kInternal) << out_of_step;
    EXPECT_NE(out_of_step.message().find("out of step"), std::string::npos) << out_of_step;
  });
}

TEST(StepChannelTest, NothingButShutdownAfterShutdown) {
  RunWithDeadline([] {
    auto comms = engine::CreateInProcessGroup(2);
    ASSERT_TRUE(comms.ok());
    std::unique_ptr<engine::Backend> backend0 = engine::CreateCpuBackend({1});
    std::unique_ptr<engine::Backend> backend1 = engine::CreateCpuBackend({1});
    std::thread follower([&] {
      StepChannel channel(*backend1, *(*comms)[1]);
      auto m = channel.Receive();
      ASSERT_TRUE(m.ok());
      EXPECT_EQ(m->kind, StepKind::kShutdown);
    });
    StepChannel channel(*backend0, *(*comms)[0]);
    ASSERT_TRUE(channel.Send(StepMessage{StepKind::kShutdown, {}, {}, {}}).ok());
    follower.join();
    // The follower is gone: a broadcast now would wait forever. The channel refuses instead.
    EXPECT_TRUE(channel.closed());
    EXPECT_TRUE(channel.Send(StepMessage{StepKind::kShutdown, {}, {}, {}}).ok());
    EXPECT_EQ(channel.Send(SampleVerify()).code(), absl::StatusCode::kFailedPrecondition);
  });
}

ReplicaOptions TinyReplica(int tp_size = 1) {
  ReplicaOptions options;
  options.model_dir = GetTestModels().target_dir;
  options.n_threads = 1;
  options.kv_blocks = 16;
  options.block_size = 16;
  options.tp_size = tp_size;
  return options;
}

TEST(VerifierReplicaTest, StepsCommitAndAbortExactly) {
  auto replica = VerifierReplica::Create(TinyReplica(), nullptr);
  ASSERT_TRUE(replica.ok()) << replica.status();
  VerifierReplica& r = **replica;
  const int32_t total = r.kv().total_blocks();
  engine::ForwardResult result;
  // An aborted prefill leaves nothing behind.
  ASSERT_TRUE(r.BeginPrefill({{1, std::vector<int32_t>(20, 3), {}, {19}}}, &result).ok());
  EXPECT_EQ(result.logits.size(), 512u);
  r.Abort();
  EXPECT_FALSE(r.step_open());
  EXPECT_FALSE(r.kv().HasSequence(1));
  EXPECT_EQ(r.kv().free_blocks(), total);
  // A committed prefill keeps its sequence; prefill commits carry no ops.
  ASSERT_TRUE(r.BeginPrefill({{1, std::vector<int32_t>(20, 3), {}, {}}}, &result).ok());
  EXPECT_EQ(r.Commit({{1, 0, {0}}}).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(r.Commit({}).ok());
  EXPECT_EQ(r.kv().Length(1), 20);
  EXPECT_EQ(r.Commit({}).code(), absl::StatusCode::kFailedPrecondition) << "no open step";
  // A verify step: commit checks sequence and base, and needs every fed sequence once.
  ASSERT_TRUE(r.BeginVerify({{1, {4, 5, 6, 7}, {-1, 0, 0, 2}, {}}}, &result).ok());
  EXPECT_EQ(r.kv().Length(1), 24);
  EXPECT_EQ(r.Commit({}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.Commit({{1, 19, {0, 2}}}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.Commit({{2, 20, {0}}}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.BeginVerify({{1, {4}, {}, {}}}, &result).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(r.Commit({{1, 20, {0, 2, 3}}}).ok());
  EXPECT_EQ(r.kv().Length(1), 23);
  // An aborted verify step truncates back to the length before it.
  ASSERT_TRUE(r.BeginVerify({{1, std::vector<int32_t>(12, 9), {}, {}}}, &result).ok());
  EXPECT_EQ(r.kv().Length(1), 35);
  r.Abort();
  EXPECT_EQ(r.kv().Length(1), 23);
  EXPECT_EQ(r.kv().free_blocks(), total - 2);
  // A forward that fails leaves no step open and changes nothing.
  EXPECT_EQ(r.BeginVerify({{1, {600}, {}, {}}}, &result).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(r.step_open());
  EXPECT_EQ(r.kv().Length(1), 23);
  const KvSnapshot snapshot = r.Snapshot();
  EXPECT_EQ(snapshot.lengths.at(1), 23);
  EXPECT_EQ(snapshot.block_tables.at(1).size(), 2u);
  r.Release({1, 77});
  EXPECT_TRUE(r.Snapshot().lengths.empty());
  EXPECT_EQ(r.kv().free_blocks(), total);
}

TEST(VerifierReplicaTest, DeviceErrorsComeBeforeAnyLoad) {
  ReplicaOptions options = TinyReplica();
  options.device = "tpu";
  EXPECT_EQ(VerifierReplica::Create(options, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.device = "cuda";
  const absl::Status cuda = VerifierReplica::Create(options, nullptr).status();
  if (!engine::CudaBackendCompiled()) {
    EXPECT_EQ(cuda.code(), absl::StatusCode::kUnimplemented) << cuda;
  } else if (!cuda.ok()) {
    EXPECT_EQ(cuda.code(), absl::StatusCode::kUnavailable) << cuda;
  }
  options.device = "cpu";
  options.tp_size = 2;
  EXPECT_EQ(VerifierReplica::Create(options, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "TP without a communicator";
}

// Rank 1 cannot load its model; both ranks fail (rank 0 with ABORTED) and nobody waits.
TEST(VerifierReplicaTest, AFailedLoadOnOneRankFailsEveryRank) {
  RunWithDeadline([] {
    auto comms = engine::CreateInProcessGroup(2);
    ASSERT_TRUE(comms.ok());
    absl::Status status[2];
    std::thread rank1([&] {
      ReplicaOptions options = TinyReplica(2);
      options.tp_rank = 1;
      options.model_dir = GetTestModels().target_dir + "/no-such-dir";
      status[1] = VerifierReplica::Create(options, (*comms)[1].get()).status();
    });
    status[0] = VerifierReplica::Create(TinyReplica(2), (*comms)[0].get()).status();
    rank1.join();
    EXPECT_EQ(status[0].code(), absl::StatusCode::kAborted) << status[0];
    EXPECT_FALSE(status[1].ok());
    EXPECT_NE(status[1].code(), absl::StatusCode::kAborted)
        << "rank 1 reports its own error: " << status[1];
  });
}

TEST(InProcessTpGroupTest, RefusesShapesAndDevicesItCannotRun) {
  RunWithDeadline([] {
    ReplicaOptions options = TinyReplica(3);  // 4 heads do not split 3 ways: every rank fails
    EXPECT_FALSE(InProcessTpGroup::Start(options).ok());
    options.tp_size = 1;
    EXPECT_EQ(InProcessTpGroup::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
    options.tp_size = 2;
    options.device = "cuda";
    EXPECT_EQ(InProcessTpGroup::Start(options).status().code(), absl::StatusCode::kInvalidArgument);
  });
}

void ExpectLogitsClose(const std::vector<float>& expected, const std::vector<float>& actual,
                       const char* what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  ASSERT_FALSE(expected.empty()) << what;
  float scale = 1.0f, worst = 0.0f;
  for (float v : expected) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < expected.size(); ++i)
    worst = std::max(worst, std::fabs(expected[i] - actual[i]));
  EXPECT_LE(worst, kRelativeTolerance * scale) << what;
  std::printf("%s: max |TP 2 - TP 1| / logit scale = %.3g\n", what, worst / scale);
}

// The same prefill / tree verify / commit / abort / release sequence through a StepLeader on
// one unsharded replica and on rank 0 of a TP = 2 group (follower on its own thread): rank 0's
// logits match TP = 1 within float re-association, and both ranks stay in lockstep.
TEST(StepLeaderTest, TwoRanksMatchOneAndStayInLockstep) {
  struct Run {
    std::vector<std::vector<float>> logits;
    std::vector<KvSnapshot> snapshots;
  };
  auto script = [](StepLeader& leader, Run* run) {
    engine::ForwardResult result;
    const std::vector<int32_t> prompt_a = {1, 17, 42, 99, 5, 300, 8, 8, 9};
    const std::vector<int32_t> prompt_b = {1, 250, 251};
    ASSERT_TRUE(
        leader.BeginPrefill({{1, prompt_a, {}, {8}}, {2, prompt_b, {}, {2}}}, &result).ok());
    run->logits.push_back(result.logits);
    ASSERT_TRUE(leader.Commit({}).ok());
    // A tree on 1 (root + two branches), a chain on 2; logits at every node.
    ASSERT_TRUE(leader
                    .BeginVerify({{1, {11, 12, 13, 14, 15}, {-1, 0, 0, 1, 2}, {0, 1, 2, 3, 4}},
                                  {2, {21, 22, 23}, {}, {0, 1, 2}}},
                                 &result)
                    .ok());
    run->logits.push_back(result.logits);
    ASSERT_TRUE(leader.Commit({{1, 9, {0, 2, 4}}, {2, 3, {0}}}).ok());
    // An aborted step, then one that runs on the committed paths.
    ASSERT_TRUE(leader.BeginVerify({{1, {31, 32}, {}, {1}}}, &result).ok());
    ASSERT_TRUE(leader.Abort().ok());
    ASSERT_TRUE(leader.BeginVerify({{1, {41}, {}, {0}}, {2, {42, 43}, {}, {0, 1}}}, &result).ok());
    run->logits.push_back(result.logits);
    ASSERT_TRUE(leader.Commit({{1, 12, {0}}, {2, 4, {0, 1}}}).ok());
    // A commit that does not match the step aborts it everywhere.
    ASSERT_TRUE(leader.BeginVerify({{2, {44}, {}, {0}}}, &result).ok());
    EXPECT_EQ(leader.Commit({{2, 0, {0}}}).code(), absl::StatusCode::kInternal);
    EXPECT_FALSE(leader.replica().step_open());
    ASSERT_TRUE(leader.Release({1}).ok());
    run->snapshots.push_back(leader.replica().Snapshot());
  };

  Run one;
  auto replica = VerifierReplica::Create(TinyReplica(), nullptr);
  ASSERT_TRUE(replica.ok()) << replica.status();
  StepLeader single(**replica, nullptr);
  script(single, &one);

  Run two;
  StepRecorder recorder;
  RunWithDeadline([&] {
    auto group = InProcessTpGroup::Start(TinyReplica(2), recorder.Observer());
    ASSERT_TRUE(group.ok()) << group.status();
    StepLeader leader((*group)->rank0(), &(*group)->rank0_channel(), recorder.Observer());
    script(leader, &two);
    ASSERT_TRUE(leader.Shutdown().ok());
  });  // the group's destructor joined the follower

  ASSERT_EQ(two.logits.size(), one.logits.size());
  const char* what[] = {"prefill", "tree verify", "verify after commit"};
  for (size_t i = 0; i < one.logits.size(); ++i)
    ExpectLogitsClose(one.logits[i], two.logits[i], what[i]);
  EXPECT_TRUE(two.snapshots.back() == one.snapshots.back())
      << "TP 2 rank 0 and TP 1 hold different KV";
  EXPECT_EQ(two.snapshots.back().lengths.at(2), 6);
  ExpectLockstep(recorder, 2);
  const std::vector<StepRecord> steps = recorder.Rank(1);
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_EQ(steps[0].kind, StepKind::kPrefill);
  EXPECT_TRUE(steps[2].aborted);
  EXPECT_TRUE(steps[4].aborted) << "the mismatched commit reached the follower as an abort";
  EXPECT_EQ(steps[5].kind, StepKind::kRelease);
}

}  // namespace
}  // namespace splitspec::verifier
