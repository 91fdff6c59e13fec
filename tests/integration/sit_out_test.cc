// SmartSpec's candidate batches on the real services: a router whose latency model makes
// context expensive leaves the later, longer-context requests of its running batch out of
// every other step (router/candidate_batches.h), and their outputs still equal plain greedy
// generation on the engine, token for token, with speculation on. Verifier, drafters and the
// router are real processes on loopback (cluster.h); the latency model and the policy config
// are files the test writes to a temporary directory.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/rpc/worker_clients.h"
#include "nlohmann/json.hpp"
#include "splitspec/v1/router.grpc.pb.h"
#include "tests/integration/cluster.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec::testing {
namespace {

// The target's cost is all context (alpha: 10 ms per context token), so a prefix of the
// running batch without its longer-context tail has a higher goodput than the whole batch
// (candidate_batches.h), by a factor the router's online correction cannot undo (it scales the
// target by at most 0.1x, and the measured RPC overhead of a few ms stays far below
// 0.1 x alpha x the tail's context). Drafting is nearly free, so speculation pays and requests
// sit out with draft state on the drafter as well as the verifier.
constexpr char kContextHeavyLatencyModel[] = R"({
  "description": "integration test: context-dominated target, nearly free drafting",
  "target": {"alpha": 0.01, "gamma": 1e-5, "delta": 1e-4},
  "drafters": {
    "default": {"kind": "model", "alpha": 0, "gamma": 1e-6, "delta": 1e-6},
    "ngram": {"kind": "model_free", "constant_seconds": 1e-6}
  },
  "rpc_overhead_seconds": 1e-4
})";

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// A prompt of `len` tokens: BOS, then ids in [3, 500) (vocab 512) that depend on `seed`.
std::vector<int32_t> Prompt(int32_t seed, int32_t len) {
  std::vector<int32_t> p = {1};
  for (int32_t j = 1; j < len; ++j) p.push_back(3 + (seed * 131 + j * 37 + j * j) % 497);
  return p;
}

struct Generated {
  grpc::Status status;
  std::vector<int32_t> tokens;  // every token id streamed, in order
  v1::GenerateResponse final;
};

// Streams one request to the end; `running` is called once, after the first message (the
// request has been admitted and prefilled), or at the end if none came.
Generated Generate(const std::string& router, const v1::GenerateRequest& request,
                   const std::function<void()>& running) {
  auto stub = v1::Router::NewStub(rpc::MakeChannel(router));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  Generated out;
  bool signalled = false;
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    if (!signalled) {
      running();
      signalled = true;
    }
    out.tokens.insert(out.tokens.end(), response.token_ids().begin(), response.token_ids().end());
    out.final = response;
  }
  out.status = reader->Finish();
  if (!signalled) running();
  return out;
}

nlohmann::json PolicyState(const std::string& router) {
  auto stub = v1::Router::NewStub(rpc::MakeChannel(router));
  grpc::ClientContext context;
  v1::ServerInfo info;
  const grpc::Status status = stub->GetServerInfo(&context, v1::GetServerInfoRequest(), &info);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.policy(), "smartspec");
  return nlohmann::json::parse(info.policy_state_json(), nullptr, /*allow_exceptions=*/false);
}

struct Job {
  std::vector<int32_t> prompt;
  int max_tokens;
  std::string pool;
};

class ServicesSitOutTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ServicesSitOutTest, LongerContextRequestsSitOutAndOutputsEqualPlainGreedy) {
  const std::string granularity = GetParam();
  Cluster& cluster = Cluster::Get();
  ScopedTempDir dir("sit_out_it_");
  WriteFile(dir.Join("latency.json"), kContextHeavyLatencyModel);
  WriteFile(dir.Join("policy.json"), nlohmann::json{{"granularity", granularity}}.dump());
  auto router = cluster.StartRouter({"--drafter", "model=" + cluster.model_drafter(), "--drafter",
                                     "ngram=" + cluster.ngram_drafter(), "--policy", "smartspec",
                                     "--policy-config", dir.Join("policy.json"), "--latency-model",
                                     dir.Join("latency.json")});

  // Prompt lengths rise in FCFS order, with gaps far larger than what a request generates
  // before the next one arrives, so every running request has a longer context than those
  // admitted before it: the prefix without the later ones always scores higher, and they sit
  // out whenever the starvation bound lets them (every other step).
  const std::vector<Job> jobs = {{Prompt(1, 4), 160, "model"},
                                 {Prompt(2, 100), 120, "model"},
                                 {Prompt(3, 220), 64, "ngram"},
                                 {Prompt(4, 340), 48, "model"}};
  std::vector<std::vector<int32_t>> references;
  for (const Job& job : jobs) {
    references.push_back(GreedyReference(GetTestModels().target_dir, job.prompt, job.max_tokens));
  }

  // Each request is sent once the one before it streams (is running), so the FCFS order of
  // the running batch is the order above; they then all run concurrently.
  std::vector<Generated> outputs(jobs.size());
  std::vector<std::promise<void>> running(jobs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::future<void> started = running[i].get_future();
    threads.emplace_back([&, i] {
      v1::GenerateRequest request;
      request.mutable_tokens()->mutable_ids()->Add(jobs[i].prompt.begin(), jobs[i].prompt.end());
      request.set_max_tokens(jobs[i].max_tokens);
      request.set_ignore_eos(true);  // the reference decodes a fixed number of tokens
      request.set_drafter(jobs[i].pool);
      outputs[i] = Generate(router->address(), request, [&] { running[i].set_value(); });
    });
    // Bounds a failure only (the event waited for is the request's first message).
    if (started.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      ADD_FAILURE() << "request " << i << " never started streaming";
      break;
    }
  }
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(threads.size(), jobs.size());

  int64_t drafted = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_TRUE(outputs[i].status.ok()) << i << ": " << outputs[i].status.error_message();
    EXPECT_EQ(outputs[i].tokens, references[i]) << granularity << " request " << i;
    EXPECT_EQ(outputs[i].final.finish_reason(), v1::FINISH_REASON_LENGTH) << i;
    EXPECT_EQ(outputs[i].final.usage().completion_tokens(), jobs[i].max_tokens) << i;
    drafted += outputs[i].final.usage().drafted_tokens();
  }
  EXPECT_GT(drafted, 0) << "nothing was speculated: the sit-outs were not tested with drafts";

  const nlohmann::json state = PolicyState(router->address());
  ASSERT_TRUE(state.is_object()) << state.dump();
  std::printf("%s: drafted %lld, policy state %s\n", granularity.c_str(),
              static_cast<long long>(drafted), state.dump().c_str());
  EXPECT_EQ(state.value("granularity", ""), granularity);
  EXPECT_TRUE(state.value("prefix_search", false));
  EXPECT_GT(state.value("short_prefix_steps", int64_t{0}), 0) << state.dump();
  EXPECT_GT(state.value("sat_out_request_steps", int64_t{0}), 0) << state.dump();
  EXPECT_EQ(router->Stop(), 0);  // drained and exited cleanly
}

INSTANTIATE_TEST_SUITE_P(Granularities, ServicesSitOutTest, ::testing::Values("batch", "request"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace splitspec::testing
