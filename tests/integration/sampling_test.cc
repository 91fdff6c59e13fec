// Sampled requests end to end (router, verifier and drafters as real processes): with
// speculation on, a request with temperature > 0 is drafted (the draft model sends its q rows
// over gRPC, n-gram drafts stay one-hot) and verified by rejection sampling instead of being
// refused; its output is a function of its seed, which the router chooses and reports when the
// client leaves it unset; and greedy requests are unaffected. That the
// sampled tokens are distributed exactly as target-only sampling is checked in-process, over
// thousands of seeds, by tests/unit/verifier/sampled_distribution_test.cc.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/rpc/worker_clients.h"
#include "splitspec/v1/router.grpc.pb.h"
#include "tests/integration/cluster.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec::testing {
namespace {

struct Generated {
  grpc::Status status;
  std::vector<int32_t> tokens;
  v1::GenerateResponse final;
};

// `seed` unset: the router chooses one.
v1::GenerateRequest Request(const std::vector<int32_t>& prompt, int max_tokens, const std::string& pool,
                            float temperature, std::optional<uint64_t> seed) {
  v1::GenerateRequest request;
  request.mutable_tokens()->mutable_ids()->Add(prompt.begin(), prompt.end());
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);
  request.set_drafter(pool);
  request.mutable_sampling()->set_temperature(temperature);
  request.mutable_sampling()->set_top_k(64);
  if (seed.has_value()) request.mutable_sampling()->set_seed(*seed);
  return request;
}

Generated Generate(const std::string& router, const v1::GenerateRequest& request) {
  auto stub = v1::Router::NewStub(rpc::MakeChannel(router));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  Generated out;
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    out.tokens.insert(out.tokens.end(), response.token_ids().begin(), response.token_ids().end());
    out.final = response;
  }
  out.status = reader->Finish();
  return out;
}

// The target's greedy continuation makes a prompt the draft model agrees with often, so that
// drafts get accepted as well as rejected.
std::vector<int32_t> Prompt() {
  const std::vector<int32_t> base = {1, 17, 42, 99, 5, 300};
  std::vector<int32_t> prompt = base;
  const std::vector<int32_t> tail = GreedyReference(GetTestModels().target_dir, base, 16);
  prompt.insert(prompt.end(), tail.begin(), tail.end());
  return prompt;
}

constexpr int kTokens = 24;

TEST(SamplingTest, SampledRequestsAreSpeculatedAndReproducibleFromTheirSeed) {
  const std::string& router = Cluster::Get().Router("static:3");
  const std::vector<int32_t> prompt = Prompt();
  for (const char* pool : {"model", "ngram"}) {
    SCOPED_TRACE(pool);
    const Generated first = Generate(router, Request(prompt, kTokens, pool, 0.8f, 1234));
    ASSERT_TRUE(first.status.ok()) << first.status.error_message();
    ASSERT_EQ(first.tokens.size(), static_cast<size_t>(kTokens));
    EXPECT_EQ(first.final.usage().completion_tokens(), kTokens);
    if (std::string(pool) == "model") {
      // The draft model always proposes: every step but the last speculated, and the
      // rejection sampler accepted some of it.
      EXPECT_GT(first.final.usage().drafted_tokens(), 0);
      EXPECT_GT(first.final.usage().accepted_tokens(), 0);
      EXPECT_LT(first.final.usage().steps(), kTokens);
    }
    // The same seed reproduces the output; another seed changes it.
    const Generated again = Generate(router, Request(prompt, kTokens, pool, 0.8f, 1234));
    ASSERT_TRUE(again.status.ok()) << again.status.error_message();
    EXPECT_EQ(again.tokens, first.tokens);
    EXPECT_EQ(first.final.seed(), 1234u);
    const Generated other = Generate(router, Request(prompt, kTokens, pool, 0.8f, 99));
    ASSERT_TRUE(other.status.ok()) << other.status.error_message();
    EXPECT_NE(other.tokens, first.tokens);
  }
}

// With the pipeline the router may draft a position first as a chain's guess or in a draft made
// ahead that is then dropped, choices that follow measured timings; the drafter's draws are
// keyed by position, so the same seed still gives the same output.
TEST(SamplingTest, SeededRequestsReproduceWithThePipeline) {
  const std::string& router = Cluster::Get().Router("static:3", {"--pipeline", "on"});
  const std::vector<int32_t> prompt = Prompt();
  const Generated first = Generate(router, Request(prompt, kTokens, "model", 0.8f, 1234));
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_GT(first.final.usage().drafted_tokens(), 0);
  for (int repeat = 0; repeat < 2; ++repeat) {
    const Generated again = Generate(router, Request(prompt, kTokens, "model", 0.8f, 1234));
    ASSERT_TRUE(again.status.ok()) << again.status.error_message();
    EXPECT_EQ(again.tokens, first.tokens) << "repeat " << repeat;
  }
}

TEST(SamplingTest, UnseededRequestsGetTheirOwnSeedWhichReproducesTheOutput) {
  const std::string& router = Cluster::Get().Router("static:3");
  const std::vector<int32_t> prompt = Prompt();
  const Generated first = Generate(router, Request(prompt, kTokens, "model", 0.8f, std::nullopt));
  const Generated second = Generate(router, Request(prompt, kTokens, "model", 0.8f, std::nullopt));
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  ASSERT_TRUE(first.final.has_seed());
  ASSERT_TRUE(second.final.has_seed());
  EXPECT_NE(first.final.seed(), second.final.seed());
  // Sending the reported seed repeats the request exactly.
  const Generated replay = Generate(router, Request(prompt, kTokens, "model", 0.8f, first.final.seed()));
  ASSERT_TRUE(replay.status.ok()) << replay.status.error_message();
  EXPECT_EQ(replay.tokens, first.tokens);
  EXPECT_EQ(replay.final.seed(), first.final.seed());
}

TEST(SamplingTest, GreedyRequestsStillMatchTargetOnlyGreedy) {
  const std::string& router = Cluster::Get().Router("static:3");
  const std::vector<int32_t> prompt = Prompt();
  const std::vector<int32_t> reference = GreedyReference(GetTestModels().target_dir, prompt, kTokens);
  for (const char* pool : {"model", "ngram"}) {
    const Generated out = Generate(router, Request(prompt, kTokens, pool, 0.0f, 1234));
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.tokens, reference) << pool;
    EXPECT_FALSE(out.final.has_seed()) << "greedy requests use no seed";
  }
}

}  // namespace
}  // namespace splitspec::testing
