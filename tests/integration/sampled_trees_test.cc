// Sampled draft trees through the real services: a router asking the draft-model drafter for
// sampled trees (static-tree:3:8), the drafter sending each node's q row over gRPC, the verifier
// running tree rejection sampling, all as processes on loopback. Thousands of seeded requests'
// first generated tokens are compared with the target's exact conditional distributions,
// computed independently in this process (tests/unit/verifier/distribution_check.h, the method
// and power of the in-process chain and tree tests).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/rpc/worker_clients.h"
#include "splitspec/v1/router.grpc.pb.h"
#include "tests/integration/cluster.h"
#include "tests/unit/sampling/chi_square.h"
#include "tests/unit/verifier/distribution_check.h"

namespace splitspec::testing {
namespace {

using verifier::Expected;
using verifier::Sample;

constexpr int kSamples = 2000;
constexpr int kClients = 16;
constexpr int kTokens = 6;

struct Outcome {
  std::vector<int32_t> tokens;
  int64_t drafted = 0, accepted = 0, steps = 0;
  std::string error;
};

Outcome GenerateSampled(v1::Router::Stub& stub, const std::vector<int32_t>& prompt, uint64_t seed) {
  v1::GenerateRequest request;
  request.mutable_tokens()->mutable_ids()->Add(prompt.begin(), prompt.end());
  request.set_max_tokens(kTokens);
  request.set_ignore_eos(true);
  request.set_drafter("model");
  request.mutable_sampling()->set_temperature(1.0f);
  request.mutable_sampling()->set_seed(seed);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  Outcome out;
  auto reader = stub.Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    out.tokens.insert(out.tokens.end(), response.token_ids().begin(), response.token_ids().end());
    if (response.has_usage()) {
      out.drafted = response.usage().drafted_tokens();
      out.accepted = response.usage().accepted_tokens();
      out.steps = response.usage().steps();
    }
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) out.error = status.error_message();
  return out;
}

TEST(SampledTreesServicesTest, SampledTreesThroughTheServicesMatchTheTarget) {
  const std::string& router = Cluster::Get().Router("static-tree:3:8", {"--max-k", "8"});
  const std::vector<int32_t> prompt = verifier::DraftModelPrompt();
  std::vector<Outcome> outcomes(kSamples);
  std::atomic<int> next{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      auto stub = v1::Router::NewStub(rpc::MakeChannel(router));
      for (int i = next++; i < kSamples; i = next++) {
        outcomes[i] = GenerateSampled(*stub, prompt, static_cast<uint64_t>(i + 1));
      }
    });
  }
  for (std::thread& t : clients) t.join();

  std::vector<Sample> samples;
  int64_t drafted = 0, accepted = 0, steps = 0;
  for (int i = 0; i < kSamples; ++i) {
    const Outcome& o = outcomes[i];
    ASSERT_TRUE(o.error.empty()) << "seed " << i + 1 << ": " << o.error;
    ASSERT_EQ(o.tokens.size(), static_cast<size_t>(kTokens)) << "seed " << i + 1;
    samples.push_back({o.tokens[0], o.tokens[1], o.tokens[2], -1});
    drafted += o.drafted;
    accepted += o.accepted;
    steps += o.steps;
  }
  // Trees were verified: more draft nodes than levels per speculative request-step (each
  // request's first token comes from its prefill, the rest from steps).
  EXPECT_GT(drafted, 3 * (steps - kSamples));
  EXPECT_GT(accepted, 0);

  engine::SamplingParams params;
  params.temperature = 1.0f;
  const Expected expected = verifier::ExactTargetDistributions(prompt, samples, params);
  const double p1 = verifier::PValue(samples, expected.t1, &Sample::t1);
  const double p2 = verifier::PValue(samples, expected.t2, &Sample::t2);
  std::printf("services, sampled trees 3 levels / 8 nodes: %d samples, %lld drafted, %lld accepted, "
              "p(t1)=%.3g p(t2)=%.3g\n",
              kSamples, static_cast<long long>(drafted), static_cast<long long>(accepted), p1, p2);
  EXPECT_GT(p1, kChiSquareMinPValue);
  EXPECT_GT(p2, kChiSquareMinPValue);
}

}  // namespace
}  // namespace splitspec::testing
