// Tests of common/engine/sampling: parameter validation, argmax, the temperature / top-k /
// top-p probabilities against closed forms, the RNG stream and the sampler's distribution.
#include "common/engine/sampling/sampler.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/sampling/chi_square.h"

namespace splitspec::engine {
namespace {

using ::splitspec::testing::ChiSquarePValue;
using ::splitspec::testing::ChiSquareSurvival;
using ::splitspec::testing::kChiSquareMinPValue;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

SamplingParams Params(float temperature, int top_k = 0, float top_p = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  return p;
}

// Logits whose softmax at temperature 1 is `probs` (zeros become -inf).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -kInf);
  return logits;
}

void ExpectProbs(const std::vector<float>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-6) << "index " << i;
  }
}

TEST(ValidateSamplingParams, AcceptsGoodParams) {
  EXPECT_TRUE(ValidateSamplingParams(Params(0.0f)).ok());
  EXPECT_TRUE(ValidateSamplingParams(Params(0.7f, 50, 0.9f)).ok());
  EXPECT_TRUE(ValidateSamplingParams(Params(1.0f, 0, 1.0f)).ok());
}

TEST(ValidateSamplingParams, RejectsBadParams) {
  for (const SamplingParams& bad :
       {Params(-0.1f), Params(kNaN), Params(kInf), Params(1.0f, -1), Params(1.0f, 0, 0.0f),
        Params(1.0f, 0, 1.5f), Params(1.0f, 0, -0.2f), Params(1.0f, 0, kNaN)}) {
    const absl::Status status = ValidateSamplingParams(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
        << bad.temperature << " " << bad.top_k << " " << bad.top_p;
  }
}

TEST(Argmax, PicksLargestAndLowestIndexOnTies) {
  EXPECT_EQ(Argmax(std::vector<float>{0.1f, 3.0f, -2.0f, 1.0f}), 1);
  EXPECT_EQ(Argmax(std::vector<float>{2.0f, 5.0f, 5.0f, 5.0f}), 1);
  EXPECT_EQ(Argmax(std::vector<float>{-kInf, -kInf}), 0);
  EXPECT_EQ(Argmax(std::vector<float>{kNaN, -1.0f, kNaN, 4.0f}), 3);
  EXPECT_EQ(Argmax(std::vector<float>{7.0f}), 0);
  EXPECT_EQ(Argmax(std::vector<float>{}), -1);
}

TEST(ComputeProbabilities, GreedyIsOneHotAtArgmax) {
  ExpectProbs(ComputeProbabilities(std::vector<float>{1.0f, 4.0f, 4.0f, 0.0f}, Params(0.0f)),
              {0, 1, 0, 0});
}

TEST(ComputeProbabilities, SoftmaxClosedForm) {
  // softmax(log 1, log 2, log 3) = (1, 2, 3) / 6.
  ExpectProbs(ComputeProbabilities(LogitsOf({1, 2, 3}), Params(1.0f)), {1 / 6.0, 2 / 6.0, 0.5});
  // Temperature 2 halves the logits: (0, 2 log 2) -> exp (1, 2) -> (1/3, 2/3).
  const float two_log2 = static_cast<float>(2 * std::log(2.0));
  ExpectProbs(ComputeProbabilities(std::vector<float>{0.0f, two_log2}, Params(2.0f)),
              {1 / 3.0, 2 / 3.0});
  // Large logits do not overflow.
  ExpectProbs(ComputeProbabilities(std::vector<float>{1000.0f, 1000.0f}, Params(1.0f)), {0.5, 0.5});
}

TEST(ComputeProbabilities, TinyTemperatureApproachesArgmax) {
  ExpectProbs(ComputeProbabilities(std::vector<float>{1.0f, 2.0f, 1.5f}, Params(1e-30f)),
              {0, 1, 0});
}

// Logits of a real model's magnitude at temperatures a client may send by mistake: the result
// is the argmax, one-hot, and sampling from it returns that token (never -1).
TEST(ComputeProbabilities, DegenerateTemperaturesAreArgmaxForAnyLogitScale) {
  Rng rng(3);
  for (float t : {1e-20f, 1e-30f, 1e-38f, 1e-45f}) {
    for (float scale : {1.0f, 7.3f, 113.9f, 3.1e4f}) {
      const std::vector<float> logits = {-0.7f * scale, 0.91f * scale, 0.3f * scale, 0.9f * scale};
      ExpectProbs(ComputeProbabilities(logits, Params(t)), {0, 1, 0, 0});
      EXPECT_EQ(SampleToken(logits, Params(t), rng), 1) << "T=" << t << " scale " << scale;
    }
  }
}

TEST(ComputeProbabilities, TopKKeepsLargestAndRenormalises) {
  // Probabilities 0.1, 0.4, 0.3, 0.2: top-2 keeps 0.4 and 0.3.
  ExpectProbs(ComputeProbabilities(LogitsOf({0.1, 0.4, 0.3, 0.2}), Params(1.0f, 2)),
              {0, 4 / 7.0, 3 / 7.0, 0});
  // top_k >= vocab is no cut.
  ExpectProbs(ComputeProbabilities(LogitsOf({0.1, 0.4, 0.3, 0.2}), Params(1.0f, 4)),
              {0.1, 0.4, 0.3, 0.2});
  ExpectProbs(ComputeProbabilities(LogitsOf({0.1, 0.4, 0.3, 0.2}), Params(1.0f, 9)),
              {0.1, 0.4, 0.3, 0.2});
  // top_k 1 is one-hot.
  ExpectProbs(ComputeProbabilities(LogitsOf({0.1, 0.4, 0.3, 0.2}), Params(1.0f, 1)), {0, 1, 0, 0});
}

TEST(ComputeProbabilities, TopKTiesKeepLowestIndices) {
  ExpectProbs(
      ComputeProbabilities(std::vector<float>{0.0f, 1.0f, 1.0f, 1.0f, 1.0f}, Params(1.0f, 2)),
      {0, 0.5, 0.5, 0, 0});
}

TEST(ComputeProbabilities, TopPKeepsShortestPrefixReachingMass) {
  const std::vector<float> logits = LogitsOf({0.125, 0.5, 0.125, 0.25});
  ExpectProbs(ComputeProbabilities(logits, Params(1.0f, 0, 0.1f)), {0, 1, 0, 0});
  ExpectProbs(ComputeProbabilities(logits, Params(1.0f, 0, 0.6f)), {0, 2 / 3.0, 0, 1 / 3.0});
  // 0.5 + 0.25 + 0.125 = 0.875 >= 0.8; of the two 0.125 entries the lower index stays.
  ExpectProbs(ComputeProbabilities(logits, Params(1.0f, 0, 0.8f)), {1 / 7.0, 4 / 7.0, 0, 2 / 7.0});
  ExpectProbs(ComputeProbabilities(logits, Params(1.0f, 0, 1.0f)), {0.125, 0.5, 0.125, 0.25});
}

TEST(ComputeProbabilities, TopKThenTopP) {
  // top-3 of (0.4, 0.3, 0.2, 0.1) -> (4, 3, 2) / 9; top_p 0.75 needs 4/9 + 3/9 = 0.78.
  ExpectProbs(ComputeProbabilities(LogitsOf({0.4, 0.3, 0.2, 0.1}), Params(1.0f, 3, 0.75f)),
              {4 / 7.0, 3 / 7.0, 0, 0});
}

TEST(ComputeProbabilities, NonFiniteLogits) {
  ExpectProbs(ComputeProbabilities(std::vector<float>{-kInf, 0.0f, kNaN, 0.0f}, Params(1.0f)),
              {0, 0.5, 0, 0.5});
  ExpectProbs(ComputeProbabilities(std::vector<float>{1.0f, kInf, 3.0f, kInf}, Params(0.5f)),
              {0, 0.5, 0, 0.5});
  // Nothing usable: fall back to one-hot rather than NaNs.
  ExpectProbs(ComputeProbabilities(std::vector<float>{-kInf, -kInf}, Params(1.0f)), {1, 0});
  EXPECT_TRUE(ComputeProbabilities(std::vector<float>{}, Params(1.0f)).empty());
}

TEST(ComputeProbabilities, SumsToOneOnRandomInputs) {
  Rng rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(1 + rng.NextU64() % 300);
    for (float& x : logits) x = static_cast<float>(rng.NextUniform() * 20 - 10);
    const SamplingParams params = Params(static_cast<float>(0.1 + rng.NextUniform() * 2),
                                         static_cast<int>(rng.NextU64() % 20),
                                         static_cast<float>(0.05 + rng.NextUniform() * 0.95));
    const std::vector<float> probs = ComputeProbabilities(logits, params);
    double sum = 0;
    int n_nonzero = 0;
    for (float p : probs) {
      ASSERT_GE(p, 0.0f);
      sum += p;
      n_nonzero += p > 0;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    if (params.top_k > 0) {
      EXPECT_LE(n_nonzero, params.top_k);
    }
    // The most likely token always survives the cuts.
    EXPECT_GT(probs[Argmax(logits)], 0.0f);
  }
}

TEST(Rng, SplitMixSeedingMatchesPublishedAlgorithm) {
  // Expected words from an independent Python model of splitmix64 + xoshiro256** (the
  // published algorithms); splitmix64(0)'s first output 0xe220a8397b1dcdaf is well known.
  Rng zero(0);
  EXPECT_EQ(zero.NextU64(), 0x99ec5f36cb75f2b4ULL);
  EXPECT_EQ(zero.NextU64(), 0xbf6e1f784956452aULL);
  EXPECT_EQ(zero.NextU64(), 0x1a5f849d4933e6e0ULL);
  Rng forty_two(42);
  EXPECT_EQ(forty_two.NextU64(), 0x15780b2e0c2ec716ULL);
  EXPECT_EQ(forty_two.NextU64(), 0x6104d9866d113a7eULL);
  EXPECT_EQ(forty_two.NextU64(), 0xae17533239e499a1ULL);
}

TEST(Rng, SameSeedSameStreamDifferentSeedDifferentStream) {
  Rng a(12345), b(12345), c(12346);
  int n_equal_to_c = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.NextU64();
    ASSERT_EQ(x, b.NextU64());
    n_equal_to_c += x == c.NextU64();
  }
  EXPECT_EQ(n_equal_to_c, 0);
}

TEST(Rng, UniformInUnitIntervalWithRightMoments) {
  Rng rng(99);
  constexpr int kN = 200000;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < kN; ++i) {
    const double u = rng.NextUniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
  }
  // Mean 1/2 and variance 1/12; the standard error of the mean is ~0.00065.
  EXPECT_NEAR(sum / kN, 0.5, 0.004);
  EXPECT_NEAR(sum_sq / kN - (sum / kN) * (sum / kN), 1 / 12.0, 0.002);
}

TEST(ChiSquareHelper, MatchesClosedForms) {
  // df 2: survival exp(-x/2); df 1 and 10 at their tabulated 5% critical values.
  EXPECT_NEAR(ChiSquareSurvival(3.0, 2), std::exp(-1.5), 1e-12);
  EXPECT_NEAR(ChiSquareSurvival(20.0, 2), std::exp(-10.0), 1e-15);
  EXPECT_NEAR(ChiSquareSurvival(3.841459, 1), 0.05, 1e-6);
  EXPECT_NEAR(ChiSquareSurvival(18.307038, 10), 0.05, 1e-6);
  EXPECT_NEAR(ChiSquareSurvival(0.0, 4), 1.0, 1e-12);
}

TEST(SampleFromProbabilities, MatchesDistributionChiSquare) {
  const std::vector<double> p = {0.05, 0.0, 0.3, 0.15, 0.0, 0.25, 0.2, 0.05};
  std::vector<float> probs(p.begin(), p.end());
  Rng rng(2024);
  constexpr int kN = 200000;
  std::vector<int64_t> counts(p.size(), 0);
  for (int i = 0; i < kN; ++i) {
    const int32_t x = SampleFromProbabilities(probs, rng);
    ASSERT_GE(x, 0);
    ASSERT_LT(x, static_cast<int32_t>(p.size()));
    ++counts[x];
  }
  EXPECT_EQ(counts[1], 0);
  EXPECT_EQ(counts[4], 0);
  EXPECT_GT(ChiSquarePValue(counts, p), kChiSquareMinPValue);
  // The test has power: the same counts against a slightly different distribution fail.
  const std::vector<double> shifted = {0.06, 0.0, 0.29, 0.15, 0.0, 0.25, 0.2, 0.05};
  EXPECT_LT(ChiSquarePValue(counts, shifted), kChiSquareMinPValue);
}

TEST(SampleFromProbabilities, UnnormalisedInputAndBadInput) {
  Rng rng(5);
  std::vector<int64_t> counts(3, 0);
  constexpr int kN = 60000;
  for (int i = 0; i < kN; ++i) ++counts[SampleFromProbabilities(std::vector<float>{2, 1, 1}, rng)];
  EXPECT_GT(ChiSquarePValue(counts, {0.5, 0.25, 0.25}), kChiSquareMinPValue);
  EXPECT_EQ(SampleFromProbabilities(std::vector<float>{0, 0}, rng), -1);
  EXPECT_EQ(SampleFromProbabilities(std::vector<float>{}, rng), -1);
  EXPECT_EQ(SampleFromProbabilities(std::vector<float>{-1.0f, kNaN, 0.0f, 3.0f}, rng), 3);
}

TEST(SampleFromProbabilities, ReproducibleForASeed) {
  const std::vector<float> probs = {0.1f, 0.2f, 0.3f, 0.4f};
  Rng a(77), b(77);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(SampleFromProbabilities(probs, a), SampleFromProbabilities(probs, b));
  }
}

TEST(SampleToken, GreedyUsesNoRandomness) {
  Rng rng(1), untouched(1);
  EXPECT_EQ(SampleToken(std::vector<float>{0.0f, 2.0f, 1.0f}, Params(0.0f), rng), 1);
  EXPECT_EQ(rng.NextU64(), untouched.NextU64());
  // With a one-token nucleus sampling is deterministic too.
  EXPECT_EQ(SampleToken(std::vector<float>{0.0f, 2.0f, 5.0f}, Params(1.0f, 1), rng), 2);
}

}  // namespace
}  // namespace splitspec::engine
