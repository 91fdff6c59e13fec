// ChooseSeed: an unset seed gives each request its own random stream, and the chosen seed,
// sent back as the request's seed, reproduces the sampled tokens. NamedSeed: a named stream's
// seed follows its name and the whole's seed.
#include "common/engine/sampling/seed.h"

#include <cstdint>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/engine/sampling/sampler.h"
#include "gtest/gtest.h"

namespace splitspec::engine {
namespace {

// A sampled "request": kTokens draws from eight equally likely tokens with its own RNG.
std::vector<int32_t> SampleRequest(uint64_t seed) {
  constexpr int kTokens = 64;
  const std::vector<float> logits(8, 0.0f);
  SamplingParams params;
  params.temperature = 1.0f;
  params.seed = seed;
  Rng rng(params.seed);
  std::vector<int32_t> tokens;
  for (int i = 0; i < kTokens; ++i) tokens.push_back(SampleToken(logits, params, rng));
  return tokens;
}

TEST(ChooseSeedTest, RequestedSeedIsUsedAsGiven) {
  EXPECT_EQ(ChooseSeed(42), 42u);
  // 0 is a seed like any other once the client sets it.
  EXPECT_EQ(ChooseSeed(0), 0u);
  EXPECT_EQ(ChooseSeed(UINT64_MAX), UINT64_MAX);
}

TEST(ChooseSeedTest, UnsetSeedsAreFreshForEveryRequest) {
  std::set<uint64_t> seeds;
  for (int i = 0; i < 1000; ++i) seeds.insert(ChooseSeed(std::nullopt));
  EXPECT_EQ(seeds.size(), 1000u);
}

TEST(ChooseSeedTest, UnsetSeedsAreFreshAcrossThreads) {
  constexpr int kThreads = 4, kPerThread = 250;
  std::vector<std::vector<uint64_t>> drawn(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&drawn, t] {
      for (int i = 0; i < kPerThread; ++i) drawn[t].push_back(ChooseSeed(std::nullopt));
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::set<uint64_t> seeds;
  for (const auto& list : drawn) seeds.insert(list.begin(), list.end());
  EXPECT_EQ(seeds.size(), static_cast<size_t>(kThreads * kPerThread));
}

TEST(ChooseSeedTest, TwoUnseededRequestsSampleDifferentTokens) {
  const uint64_t first = ChooseSeed(std::nullopt);
  const uint64_t second = ChooseSeed(std::nullopt);
  ASSERT_NE(first, second);
  // 64 uniform draws from 8 tokens agree by chance with probability 8^-64.
  EXPECT_NE(SampleRequest(first), SampleRequest(second));
}

TEST(ChooseSeedTest, ReportedSeedReproducesTheOutput) {
  const uint64_t reported = ChooseSeed(std::nullopt);
  const std::vector<int32_t> original = SampleRequest(reported);
  EXPECT_EQ(SampleRequest(ChooseSeed(reported)), original);
}

// The same pair gives the same seed; another name or another whole's seed gives another one.
TEST(NamedSeedTest, FollowsTheNameAndTheSeed) {
  EXPECT_EQ(NamedSeed(1, "a"), NamedSeed(1, "a"));
  EXPECT_NE(NamedSeed(1, "a"), NamedSeed(1, "b"));
  EXPECT_NE(NamedSeed(1, "a"), NamedSeed(2, "a"));
  EXPECT_NE(NamedSeed(0, ""), NamedSeed(0, "x"));
}

}  // namespace
}  // namespace splitspec::engine
