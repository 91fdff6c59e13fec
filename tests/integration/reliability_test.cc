// Faults and bad input against real splitspec processes on loopback (docs/reliability.md):
//  - bad requests mixed into a batch fail alone (INVALID_ARGUMENT / length), the others match
//    their solo greedy outputs;
//  - kill -9 or SIGTERM of one of two verifier replicas, and kill -9 of one of two drafter
//    replicas, under concurrent greedy streams: nothing fails, every output equals the
//    target-only greedy output;
//  - kill -9 of a router: its sessions on the workers are reclaimed within the lease, and a new
//    router serves on the same workers; two routers share one verifier without collisions;
//  - the drafter's session and history caps hold under a flood of sessions.
// Each test starts its own processes (they differ in flags) and prints the figures it measured
// (stall after a fault, reclaim time, RSS) on lines starting with "[figure]".
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/rpc/worker_clients.h"
#include "splitspec/v1/router.grpc.pb.h"
#include "tests/integration/cluster.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec::testing {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

double SecondsBetween(SteadyTime a, SteadyTime b) { return std::chrono::duration<double>(b - a).count(); }

std::unique_ptr<Process> StartVerifier(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {SPLITSPEC_VERIFIER_BIN, "--model", GetTestModels().target_dir, "--expose-model-path", "--port", "0",
                                   "--max-draft-tokens", "16", "--kv-blocks", "1024", "--threads", "1",
                                   "--metrics-port", "-1", "--drain-seconds", "2"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return Process::Start(argv);
}

std::unique_ptr<Process> StartNgramDrafter(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {SPLITSPEC_DRAFTER_BIN, "--ngram", "--ngram-min", "1", "--ngram-max", "3",
                                   "--port", "0", "--max-draft-tokens", "8", "--metrics-port", "-1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return Process::Start(argv);
}

std::unique_ptr<Process> StartRouter(const std::string& verifiers, const std::string& drafters,
                                     const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {SPLITSPEC_ROUTER_BIN, "--verifier", verifiers, "--port", "0",
                                   "--metrics-port", "-1", "--tokenizer", "none", "--policy", "static:3"};
  if (!drafters.empty()) {
    argv.push_back("--drafter");
    argv.push_back("ngram=" + drafters);
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  return Process::Start(argv);
}

// Resident memory of a process in MiB (VmRSS).
double RssMiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

// Polls a worker's Info until `done` holds (an observable state change in another process;
// the deadline only bounds a failure). Returns the seconds it took, or -1 on timeout.
double WaitForInfo(const std::function<absl::StatusOr<spec::WorkerInfo>()>& info,
                   const std::function<bool(const spec::WorkerInfo&)>& done, double timeout_seconds) {
  const SteadyTime start = std::chrono::steady_clock::now();
  while (SecondsBetween(start, std::chrono::steady_clock::now()) < timeout_seconds) {
    absl::StatusOr<spec::WorkerInfo> now = info();
    if (now.ok() && done(*now)) return SecondsBetween(start, std::chrono::steady_clock::now());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

std::vector<int32_t> PromptFor(int i) {
  return {1, 10 + i, 20 + 2 * i, 7, 10 + i, 20 + 2 * i, 3 + i % 5, 40 + i};
}

v1::GenerateRequest TokenRequest(const std::vector<int32_t>& prompt, int max_tokens) {
  v1::GenerateRequest request;
  request.mutable_tokens()->mutable_ids()->Add(prompt.begin(), prompt.end());
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);
  return request;
}

// Concurrent Generate streams, each on its own thread, recording when every message came.
class Streams {
 public:
  struct Result {
    grpc::Status status;
    std::vector<int32_t> tokens;
    v1::GenerateResponse final;
    std::vector<SteadyTime> arrivals;
  };

  Streams(const std::string& router, std::vector<v1::GenerateRequest> requests) : results_(requests.size()) {
    for (size_t i = 0; i < requests.size(); ++i) {
      threads_.emplace_back([this, router, i, request = requests[i]] {
        auto stub = v1::Router::NewStub(rpc::MakeChannel(router));
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(90));
        auto reader = stub->Generate(&context, request);
        v1::GenerateResponse response;
        Result& out = results_[i];
        while (reader->Read(&response)) {
          out.tokens.insert(out.tokens.end(), response.token_ids().begin(), response.token_ids().end());
          out.final = response;
          out.arrivals.push_back(std::chrono::steady_clock::now());
          std::lock_guard<std::mutex> lock(mu_);
          ++messages_;
          cv_.notify_all();
        }
        out.status = reader->Finish();
      });
    }
  }
  ~Streams() { Join(); }

  // Blocks until the streams together received `n` messages (or all ended).
  void WaitForMessages(int64_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(60), [&] { return messages_ >= n; });
  }
  const std::vector<Result>& Join() {
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
    return results_;
  }
  // The longest a stream went without a message, counted from `from` (the fault).
  double LongestStallAfter(SteadyTime from) const {
    double longest = 0;
    for (const Result& r : results_) {
      SteadyTime previous = from;
      for (SteadyTime t : r.arrivals) {
        if (t < from) continue;
        longest = std::max(longest, SecondsBetween(previous, t));
        previous = t;
      }
    }
    return longest;
  }

 private:
  std::vector<Result> results_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t messages_ = 0;
};

constexpr int kStreams = 32;
constexpr int kLongTokens = 160;

std::vector<v1::GenerateRequest> LongRequests() {
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < kStreams; ++i) requests.push_back(TokenRequest(PromptFor(i), kLongTokens));
  return requests;
}

const std::vector<std::vector<int32_t>>& LongReferences() {
  static const auto* references = [] {
    auto* out = new std::vector<std::vector<int32_t>>();
    for (int i = 0; i < kStreams; ++i) out->push_back(GreedyReference(GetTestModels().target_dir, PromptFor(i), kLongTokens));
    return out;
  }();
  return *references;
}

// Every stream completed with FINISH_REASON_LENGTH and exactly the target-only greedy output.
int ExpectAllCompleteAndEqual(const std::vector<Streams::Result>& results) {
  int completed = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_TRUE(results[i].status.ok()) << "stream " << i << ": " << results[i].status.error_message();
    EXPECT_EQ(results[i].final.finish_reason(), v1::FINISH_REASON_LENGTH) << "stream " << i;
    EXPECT_EQ(results[i].tokens, LongReferences()[i]) << "stream " << i;
    completed += results[i].status.ok() && results[i].tokens == LongReferences()[i];
  }
  return completed;
}

// ---- bad input in a batch -------------------------------------------------------------------

TEST(ReliabilityTest, BadRequestsInABatchFailAloneAndTheOthersMatchTheirSoloOutputs) {
  constexpr int kContext = 64;
  auto verifier = StartVerifier({"--max-context", std::to_string(kContext)});
  auto drafter = StartNgramDrafter();
  auto router = StartRouter(verifier->address(), drafter->address());
  constexpr int kNormal = 7, kNormalTokens = 24;
  for (int round = 0; round < 3; ++round) {
    std::vector<v1::GenerateRequest> requests;
    for (int i = 0; i < kNormal; ++i) requests.push_back(TokenRequest(PromptFor(i + round), kNormalTokens));
    std::vector<int32_t> too_long(kContext + 6, 9);
    too_long[0] = 1;
    requests.push_back(TokenRequest(too_long, 8));                                  // [7]
    const std::vector<int32_t> overrun_prompt = {1, 5, 6, 7, 8, 9, 10, 11, 12, 13};  // 10 tokens
    requests.push_back(TokenRequest(overrun_prompt, 500));                           // [8]
    v1::GenerateRequest degenerate = TokenRequest(PromptFor(50 + round), kNormalTokens);
    degenerate.mutable_sampling()->set_temperature(1e-20f);
    degenerate.mutable_sampling()->set_seed(3);
    requests.push_back(degenerate);  // [9]
    Streams streams(router->address(), requests);
    const std::vector<Streams::Result>& results = streams.Join();

    for (int i = 0; i < kNormal; ++i) {
      EXPECT_TRUE(results[i].status.ok()) << results[i].status.error_message();
      EXPECT_EQ(results[i].tokens, GreedyReference(GetTestModels().target_dir, PromptFor(i + round), kNormalTokens));
    }
    EXPECT_EQ(results[7].status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << results[7].status.error_message();
    // The context holds 64 tokens: 10 prompt + 54 generated in KV + the last one emitted.
    EXPECT_TRUE(results[8].status.ok()) << results[8].status.error_message();
    EXPECT_EQ(results[8].final.finish_reason(), v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(results[8].tokens, GreedyReference(GetTestModels().target_dir, overrun_prompt, kContext - 10 + 1));
    EXPECT_TRUE(results[9].status.ok()) << results[9].status.error_message();
    EXPECT_EQ(results[9].tokens, GreedyReference(GetTestModels().target_dir, PromptFor(50 + round), kNormalTokens));
  }
  rpc::VerifierClient client(rpc::MakeChannel(verifier->address()));
  EXPECT_GE(WaitForInfo([&] { return client.GetInfo(); },
                        [](const spec::WorkerInfo& i) { return i.live_sessions == 0; }, 20),
            0);
  std::printf("[figure] bad input mixed into batches (3 rounds of 7 normal + 3 bad): verifier RSS %.1f MiB, "
              "router RSS %.1f MiB after\n",
              RssMiB(verifier->pid()), RssMiB(router->pid()));
}

// NaN / negative draft probabilities are the item's INVALID_ARGUMENT, and +inf too.
TEST(ReliabilityTest, NonFiniteOrNegativeDraftProbabilitiesAreInvalid) {
  auto verifier = StartVerifier();
  rpc::VerifierClient client(rpc::MakeChannel(verifier->address()));
  engine::SamplingParams sampled;
  sampled.temperature = 0.8f;
  auto prefilled = client.Prefill({{11, PromptFor(1), sampled}, {12, PromptFor(2), sampled}});
  ASSERT_TRUE(prefilled.ok()) << prefilled.status();
  auto info = client.GetInfo();
  ASSERT_TRUE(info.ok());
  for (float bad : {std::nanf(""), -0.25f, std::numeric_limits<float>::infinity()}) {
    spec::DraftProposal draft;
    draft.tokens = {5};
    draft.parents = {-1};
    draft.probs.assign(info->vocab_size, 0.0f);
    draft.probs[5] = 1.0f;
    draft.probs[6] = bad;
    auto verified = client.Verify({{11, draft}, {12, {}}});
    ASSERT_TRUE(verified.ok()) << verified.status();
    EXPECT_EQ(verified->results[0].status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(verified->results[1].status.ok()) << verified->results[1].status;
  }
  EXPECT_TRUE(client.Release({11, 12}).ok());
}

// ---- verifier replicas ----------------------------------------------------------------------

// Sends `signal` to one of two verifier replicas while 32 greedy streams run. SIGSTOP stands
// for a hung replica: its calls time out at the router's deadline.
void RunVerifierFault(int signal, const char* name) {
  auto verifier_a = StartVerifier();
  auto verifier_b = StartVerifier();
  auto drafter = StartNgramDrafter();
  auto router = StartRouter(verifier_a->address() + "," + verifier_b->address(), drafter->address());
  LongReferences();  // computed before the clock matters
  rpc::VerifierClient victim(rpc::MakeChannel(verifier_a->address()));
  const double survivor_rss_before = RssMiB(verifier_b->pid());
  const double router_rss_before = RssMiB(router->pid());
  Streams streams(router->address(), LongRequests());
  streams.WaitForMessages(kStreams * 4);  // every stream is generating
  auto before = victim.GetInfo();
  ASSERT_TRUE(before.ok());
  EXPECT_GT(before->live_sessions, 0) << "the replica held no request when it failed";
  const SteadyTime fault = std::chrono::steady_clock::now();
  int exit_status = 0;
  if (signal == SIGSTOP) {
    kill(verifier_a->pid(), SIGSTOP);
  } else {
    exit_status = verifier_a->Kill(signal);
  }
  const std::vector<Streams::Result>& results = streams.Join();
  if (signal == SIGSTOP) verifier_a->Kill(SIGKILL);
  const int completed = ExpectAllCompleteAndEqual(results);
  EXPECT_EQ(completed, kStreams);
  if (signal == SIGTERM) {
    EXPECT_EQ(exit_status, 0);  // a drained verifier exits cleanly
  }
  // The fault hit running streams: most of them still received tokens after it.
  int after_fault = 0;
  for (const Streams::Result& r : results) after_fault += !r.arrivals.empty() && r.arrivals.back() > fault;
  EXPECT_GT(after_fault, kStreams / 2);
  std::printf("[figure] %s one of two verifiers (%d sessions on it): %d/%d completed, %d failed, outputs "
              "equal: %s, longest stream stall after the fault %.3f s; RSS surviving verifier %.1f -> %.1f "
              "MiB, router %.1f -> %.1f MiB\n",
              name, before->live_sessions, completed, kStreams, kStreams - completed,
              completed == kStreams ? "yes" : "no", streams.LongestStallAfter(fault), survivor_rss_before,
              RssMiB(verifier_b->pid()), router_rss_before, RssMiB(router->pid()));
  // The surviving replica holds nothing once the streams are done.
  rpc::VerifierClient client(rpc::MakeChannel(verifier_b->address()));
  EXPECT_GE(WaitForInfo([&] { return client.GetInfo(); },
                        [](const spec::WorkerInfo& i) { return i.live_sessions == 0; }, 20),
            0);
}

TEST(ReliabilityTest, KillingOneOfTwoVerifiersLosesNoRequest) { RunVerifierFault(SIGKILL, "kill -9"); }

TEST(ReliabilityTest, DrainingOneOfTwoVerifiersMigratesItsRequests) { RunVerifierFault(SIGTERM, "SIGTERM"); }

// A hung replica (stopped, its socket still open) is detected by the call deadline, which
// follows the latency model's prediction with a floor of 0.5 s, not the 60 s worker timeout.
TEST(ReliabilityTest, AHungVerifierIsDetectedByItsDeadlineAndItsRequestsMove) {
  RunVerifierFault(SIGSTOP, "SIGSTOP (hang)");
}

// ---- drafter replicas -----------------------------------------------------------------------

TEST(ReliabilityTest, KillingOneOfTwoDrafterReplicasLosesNoRequestAndSpeculationContinues) {
  auto verifier = StartVerifier();
  auto drafter_a = StartNgramDrafter();
  auto drafter_b = StartNgramDrafter();
  auto router = StartRouter(verifier->address(), drafter_a->address() + "," + drafter_b->address());
  LongReferences();
  Streams streams(router->address(), LongRequests());
  streams.WaitForMessages(kStreams * 4);
  rpc::DrafterClient other(rpc::MakeChannel(drafter_b->address()));
  auto before = other.GetInfo();
  ASSERT_TRUE(before.ok());
  // The pool spreads its requests over both replicas.
  EXPECT_GT(before->live_sessions, 0) << "the second replica got no request";
  EXPECT_LT(before->live_sessions, kStreams) << "the first replica got no request";
  const int32_t held = before->live_sessions;
  const SteadyTime fault = std::chrono::steady_clock::now();
  drafter_a->Kill(SIGKILL);
  // The other replica takes over the killed one's requests while the streams still run.
  const double takeover = WaitForInfo([&] { return other.GetInfo(); },
                                      [held](const spec::WorkerInfo& i) { return i.live_sessions > held; }, 20);
  const std::vector<Streams::Result>& results = streams.Join();
  const int completed = ExpectAllCompleteAndEqual(results);
  EXPECT_EQ(completed, kStreams);
  EXPECT_GE(takeover, 0) << "the other drafter never took the killed one's requests";
  int64_t drafted = 0;
  for (const Streams::Result& r : results) drafted += r.final.usage().drafted_tokens();
  EXPECT_GT(drafted, 0);
  std::printf("[figure] kill -9 one of two drafter replicas: %d/%d completed, outputs equal: %s, its requests "
              "drafting on the other after %.3f s, longest stream stall %.3f s\n",
              completed, kStreams, completed == kStreams ? "yes" : "no", takeover, streams.LongestStallAfter(fault));
}

// ---- session ownership ----------------------------------------------------------------------

TEST(ReliabilityTest, KilledRoutersSessionsAreReclaimedAndANewRouterServes) {
  constexpr double kLease = 1.0;
  auto verifier = StartVerifier({"--session-lease-seconds", "1"});
  auto drafter = StartNgramDrafter({"--session-lease-seconds", "1"});
  rpc::VerifierClient verifier_client(rpc::MakeChannel(verifier->address()));
  rpc::DrafterClient drafter_client(rpc::MakeChannel(drafter->address()));
  const double verifier_rss_before = RssMiB(verifier->pid());
  {
    auto router = StartRouter(verifier->address(), drafter->address());
    Streams streams(router->address(), LongRequests());
    streams.WaitForMessages(kStreams * 4);
    router->Kill(SIGKILL);
    streams.Join();
  }
  auto live = [](const absl::StatusOr<spec::WorkerInfo>& info) { return info.ok() ? info->live_sessions : -1; };
  const int32_t orphaned_verifier = live(verifier_client.GetInfo());
  const int32_t orphaned_drafter = live(drafter_client.GetInfo());
  const SteadyTime killed = std::chrono::steady_clock::now();
  EXPECT_GT(orphaned_verifier, 0);
  const double verifier_reclaim = WaitForInfo([&] { return verifier_client.GetInfo(); },
                                              [](const spec::WorkerInfo& i) { return i.live_sessions == 0; }, 20);
  const double drafter_reclaim = WaitForInfo([&] { return drafter_client.GetInfo(); },
                                             [](const spec::WorkerInfo& i) { return i.live_sessions == 0; }, 20);
  ASSERT_GE(verifier_reclaim, 0) << "orphaned verifier sessions were never reclaimed";
  ASSERT_GE(drafter_reclaim, 0) << "orphaned drafter sessions were never reclaimed";
  const double since_kill = SecondsBetween(killed, std::chrono::steady_clock::now());
  // Within the lease plus a few reaper periods (a quarter lease each).
  EXPECT_LE(since_kill, kLease + 1.0);
  auto info = verifier_client.GetInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->free_blocks, info->total_blocks);
  std::printf("[figure] kill -9 the router: %d verifier / %d drafter sessions orphaned, all reclaimed %.3f s "
              "after the kill (lease %.1f s); verifier RSS %.1f MiB before the run\n",
              orphaned_verifier, orphaned_drafter, since_kill, kLease, verifier_rss_before);

  // A new router on the same workers: fresh instance id, no collisions, correct outputs.
  auto router = StartRouter(verifier->address(), drafter->address());
  Streams streams(router->address(), LongRequests());
  EXPECT_EQ(ExpectAllCompleteAndEqual(streams.Join()), kStreams);
}

TEST(ReliabilityTest, TwoRoutersShareOneVerifierWithoutCollisions) {
  auto verifier = StartVerifier();
  auto drafter = StartNgramDrafter();
  auto router_a = StartRouter(verifier->address(), drafter->address());
  auto router_b = StartRouter(verifier->address(), drafter->address());
  LongReferences();
  Streams a(router_a->address(), LongRequests());
  Streams b(router_b->address(), LongRequests());
  EXPECT_EQ(ExpectAllCompleteAndEqual(a.Join()), kStreams);
  EXPECT_EQ(ExpectAllCompleteAndEqual(b.Join()), kStreams);
}

// ---- caps -----------------------------------------------------------------------------------

TEST(ReliabilityTest, DrafterSessionAndHistoryCapsHoldUnderAFlood) {
  constexpr int kMaxSessions = 16;
  constexpr int kMaxHistory = 200000;
  auto drafter = StartNgramDrafter({"--max-sessions", std::to_string(kMaxSessions), "--max-history-tokens",
                                    std::to_string(kMaxHistory), "--session-lease-seconds", "0"});
  rpc::DrafterClient client(rpc::MakeChannel(drafter->address()));
  const double rss_before = RssMiB(drafter->pid());
  constexpr int kFlood = 40;
  constexpr int kTokensEach = 20000;
  int accepted = 0, refused = 0;
  std::vector<spec::RequestId> ids;
  for (int s = 0; s < kFlood; ++s) {
    spec::ProposeItem item;
    item.id = 1000 + s;
    for (int t = 0; t < kTokensEach; ++t) item.new_tokens.push_back((t * 7 + s) % 500);
    item.shape.depth = 4;
    auto response = client.Propose({item});
    ASSERT_TRUE(response.ok()) << response.status();
    const absl::Status& status = response->results[0].status;
    if (status.ok()) {
      ++accepted;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
      ++refused;
    }
    ids.push_back(item.id);
  }
  auto info = client.GetInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_LE(info->live_sessions, kMaxSessions);
  EXPECT_LE(info->held_tokens, kMaxHistory);
  EXPECT_EQ(accepted, kMaxHistory / kTokensEach);  // the history cap binds first here
  EXPECT_EQ(refused, kFlood - accepted);
  const double rss_full = RssMiB(drafter->pid());
  ASSERT_TRUE(client.Release(ids).ok());
  info = client.GetInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->live_sessions, 0);
  EXPECT_EQ(info->held_tokens, 0);
  std::printf("[figure] drafter flood of %d sessions x %d tokens (caps %d sessions, %d tokens): %d accepted, "
              "%d RESOURCE_EXHAUSTED; RSS %.1f MiB before, %.1f MiB full, %.1f MiB after release\n",
              kFlood, kTokensEach, kMaxSessions, kMaxHistory, accepted, refused, rss_before, rss_full,
              RssMiB(drafter->pid()));
}

}  // namespace
}  // namespace splitspec::testing
