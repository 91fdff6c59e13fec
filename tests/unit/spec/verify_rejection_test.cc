// Distribution tests of rejection-sampling verification: with fixed seeds and many trials,
// the emitted tokens must be distributed exactly as sampling from the target one token at a
// time, for chains and trees, with sampled drafts (q given), deterministic drafts (no q) and
// target distributions cut by top-k. Checked with chi-square at a tiny p-value threshold.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/engine/sampling/sampler.h"
#include "common/spec/draft_tree.h"
#include "common/spec/verify.h"
#include "gtest/gtest.h"
#include "tests/unit/sampling/chi_square.h"
#include "tests/unit/spec/tree_limits.h"

namespace splitspec::spec {
namespace {

using engine::Rng;
using engine::SamplingParams;
using ::splitspec::testing::ChiSquarePValue;
using ::splitspec::testing::kChiSquareMinPValue;

using Dist = std::vector<double>;

constexpr int32_t kVocab = 6;

Dist RandomDist(Rng& rng, double spread = 1.5) {
  Dist p(kVocab);
  double sum = 0;
  for (double& v : p) {
    v = std::exp((rng.NextUniform() * 2 - 1) * spread);
    sum += v;
  }
  for (double& v : p) v /= sum;
  return p;
}

std::vector<float> LogitsOf(const Dist& p) {
  std::vector<float> logits;
  for (double v : p) {
    logits.push_back(v > 0 ? static_cast<float>(std::log(v))
                           : -std::numeric_limits<float>::infinity());
  }
  return logits;
}

int32_t Draw(const Dist& q, Rng& rng) {
  const std::vector<float> f(q.begin(), q.end());
  return engine::SampleFromProbabilities(f, rng);
}

DraftDistribution Sparse(const Dist& q) {
  const std::vector<float> f(q.begin(), q.end());
  return DraftDistribution::FromDense(f);
}

// q with `taken` tokens removed and renormalised: the distribution of the next draw without
// replacement.
Dist Without(const Dist& q, const std::vector<int32_t>& taken) {
  Dist out = q;
  for (int32_t t : taken) out[t] = 0;
  double sum = 0;
  for (double v : out) sum += v;
  for (double& v : out) v /= sum;
  return out;
}

// A target whose next-token distribution depends on the depth and the last token: p0 after
// the committed context, p1[a] after a draft token a at depth 1, p2[b] after b at depth 2.
struct Target {
  Dist p0;
  std::vector<Dist> p1, p2;

  static Target Random(Rng& rng) {
    Target t;
    t.p0 = RandomDist(rng);
    for (int a = 0; a < kVocab; ++a) t.p1.push_back(RandomDist(rng));
    for (int b = 0; b < kVocab; ++b) t.p2.push_back(RandomDist(rng));
    return t;
  }
  // Target logits rows (root first) for a tree of depth <= 2.
  std::vector<float> Logits(const DraftTree& tree) const {
    std::vector<float> rows = LogitsOf(p0);
    for (int32_t i = 0; i < tree.size(); ++i) {
      const Dist& p = tree.depth(i) == 1 ? p1[tree.token(i)] : p2[tree.token(i)];
      const std::vector<float> row = LogitsOf(p);
      rows.insert(rows.end(), row.begin(), row.end());
    }
    return rows;
  }
  // The distributions sampling would use: ComputeProbabilities of each row with `params`.
  Target Cut(const SamplingParams& params) const {
    auto cut = [&](const Dist& p) {
      const std::vector<float> probs = engine::ComputeProbabilities(LogitsOf(p), params);
      return Dist(probs.begin(), probs.end());
    };
    Target t;
    t.p0 = cut(p0);
    for (const Dist& p : p1) t.p1.push_back(cut(p));
    for (const Dist& p : p2) t.p2.push_back(cut(p));
    return t;
  }
};

struct Counts {
  std::vector<int64_t> first = std::vector<int64_t>(kVocab, 0);
  // second[a][b]: second token b after first token a; third[b][c] likewise.
  std::vector<std::vector<int64_t>> second =
      std::vector<std::vector<int64_t>>(kVocab, std::vector<int64_t>(kVocab, 0));
  std::vector<std::vector<int64_t>> third = second;
  int64_t first_accepted = 0;
  int64_t trials = 0;
};

using TreeFactory = std::function<DraftTree(Rng& draft_rng)>;

Counts RunTrials(const Target& target, const TreeFactory& make_tree, const SamplingParams& params,
                 int trials, uint64_t seed) {
  Counts counts;
  Rng draft_rng(seed * 7919 + 1);
  Rng verify_rng(seed);
  for (int t = 0; t < trials; ++t) {
    const DraftTree tree = make_tree(draft_rng);
    const absl::StatusOr<VerifyOutcome> result =
        VerifyRejection(tree, target.Logits(tree), kVocab, params, verify_rng);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return counts;
    const std::vector<int32_t>& tokens = result->tokens;
    EXPECT_EQ(tokens.size(), result->accepted_nodes.size() + 1);
    for (size_t j = 0; j < result->accepted_nodes.size(); ++j) {
      EXPECT_EQ(tree.token(result->accepted_nodes[j]), tokens[j]);
    }
    ++counts.trials;
    ++counts.first[tokens[0]];
    if (tokens.size() >= 2) {
      ++counts.first_accepted;
      ++counts.second[tokens[0]][tokens[1]];
    }
    if (tokens.size() >= 3) ++counts.third[tokens[1]][tokens[2]];
  }
  return counts;
}

// First token ~ p0; second given first a ~ p1[a]; third given second b ~ p2[b] (wherever
// enough samples exist for the chi-square approximation).
void ExpectTargetDistribution(const Counts& counts, const Target& expected) {
  EXPECT_GT(ChiSquarePValue(counts.first, expected.p0), kChiSquareMinPValue) << "first token";
  int conditional_checks = 0;
  for (int a = 0; a < kVocab; ++a) {
    int64_t n = 0;
    for (int64_t c : counts.second[a]) n += c;
    if (n < 500) continue;
    ++conditional_checks;
    EXPECT_GT(ChiSquarePValue(counts.second[a], expected.p1[a]), kChiSquareMinPValue)
        << "second token after " << a << " (" << n << " samples)";
  }
  for (int b = 0; b < kVocab; ++b) {
    int64_t n = 0;
    for (int64_t c : counts.third[b]) n += c;
    if (n < 500) continue;
    ++conditional_checks;
    EXPECT_GT(ChiSquarePValue(counts.third[b], expected.p2[b]), kChiSquareMinPValue)
        << "third token after " << b << " (" << n << " samples)";
  }
  EXPECT_GT(conditional_checks, 0);
}

SamplingParams Temperature1() {
  SamplingParams params;
  params.temperature = 1.0f;
  return params;
}

using testing::Limits;

constexpr int kTrials = 60000;

TEST(VerifyRejection, ChainWithDraftProbabilitiesMatchesTarget) {
  Rng setup(101);
  const Target target = Target::Random(setup);
  const Dist q1 = RandomDist(setup);
  std::vector<Dist> q2;  // the drafter's second distribution depends on its first token
  for (int a = 0; a < kVocab; ++a) q2.push_back(RandomDist(setup));
  const Counts counts = RunTrials(
      target,
      [&](Rng& rng) {
        const int32_t x1 = Draw(q1, rng);
        const int32_t x2 = Draw(q2[x1], rng);
        return *DraftTree::Chain({x1, x2}, Limits(kVocab), {Sparse(q1), Sparse(q2[x1])});
      },
      Temperature1(), kTrials, 1);
  ExpectTargetDistribution(counts, target);
  // The first draft is accepted with probability sum_x min(p0(x), q1(x)) (binomial, 6 sigma).
  double expected_rate = 0;
  for (int x = 0; x < kVocab; ++x) expected_rate += std::min(target.p0[x], q1[x]);
  const double rate = static_cast<double>(counts.first_accepted) / counts.trials;
  EXPECT_NEAR(rate, expected_rate, 6 * std::sqrt(expected_rate * (1 - expected_rate) / kTrials));
}

TEST(VerifyRejection, TreeWithIidSiblingsMatchesTarget) {
  Rng setup(202);
  const Target target = Target::Random(setup);
  const Dist q1 = RandomDist(setup, 2.5);  // far from p0, so siblings get rejected often
  std::vector<Dist> q2;
  for (int a = 0; a < kVocab; ++a) q2.push_back(RandomDist(setup));
  const Counts counts = RunTrials(
      target,
      [&](Rng& rng) {
        // Three siblings drawn i.i.d. from q1 (duplicates allowed), each with two i.i.d.
        // children from q2[its token].
        DraftTreeBuilder builder;
        for (int s = 0; s < 3; ++s) {
          const int32_t x = Draw(q1, rng);
          const int32_t node = builder.Add(-1, x, Sparse(q1));
          for (int c = 0; c < 2; ++c) builder.Add(node, Draw(q2[x], rng), Sparse(q2[x]));
        }
        return *std::move(builder).Build(Limits(kVocab));
      },
      Temperature1(), kTrials, 2);
  ExpectTargetDistribution(counts, target);
}

TEST(VerifyRejection, TreeWithSiblingsWithoutReplacementMatchesTarget) {
  Rng setup(303);
  const Target target = Target::Random(setup);
  const Dist q1 = RandomDist(setup, 2.0);
  const Counts counts = RunTrials(
      target,
      [&](Rng& rng) {
        DraftTreeBuilder builder;
        std::vector<int32_t> taken;
        for (int s = 0; s < 3; ++s) {
          const Dist q = Without(q1, taken);
          const int32_t x = Draw(q, rng);
          taken.push_back(x);
          const int32_t node = builder.Add(-1, x, Sparse(q));
          builder.Add(node, Draw(target.p1[x], rng), Sparse(target.p1[x]));
        }
        return *std::move(builder).Build(Limits(kVocab));
      },
      Temperature1(), kTrials, 3);
  ExpectTargetDistribution(counts, target);
}

TEST(VerifyRejection, DeterministicChainWithoutDraftProbabilities) {
  Rng setup(404);
  const Target target = Target::Random(setup);
  // An n-gram proposal: fixed tokens, no q (one-hot at the token).
  const Counts counts = RunTrials(
      target,
      [&](Rng&) {
        return *DraftTree::Chain({2, 3}, Limits(kVocab));
      },
      Temperature1(), kTrials, 4);
  ExpectTargetDistribution(counts, target);
  // A deterministic draft x is accepted with probability p0(x).
  const double rate = static_cast<double>(counts.first_accepted) / counts.trials;
  EXPECT_NEAR(rate, target.p0[2], 6 * std::sqrt(target.p0[2] * (1 - target.p0[2]) / kTrials));
  // Only token 2 can be followed by a second token.
  for (int a = 0; a < kVocab; ++a) {
    if (a == 2) continue;
    for (int64_t c : counts.second[a]) EXPECT_EQ(c, 0);
  }
}

TEST(VerifyRejection, DeterministicTreeWithDuplicateAndMixedSiblings) {
  Rng setup(505);
  const Target target = Target::Random(setup);
  const Dist q = RandomDist(setup);
  const Counts counts = RunTrials(
      target,
      [&](Rng& rng) {
        // Fixed siblings 1, 4, 1 (the duplicate can never be accepted after the first 1 is
        // rejected), then one sampled sibling with its q; each with a fixed child.
        DraftTreeBuilder builder;
        for (int32_t x : {1, 4, 1}) builder.Add(builder.Add(-1, x), (x + 1) % kVocab);
        const int32_t sampled = Draw(q, rng);
        builder.Add(builder.Add(-1, sampled, Sparse(q)), 0);
        return *std::move(builder).Build(Limits(kVocab));
      },
      Temperature1(), kTrials, 5);
  ExpectTargetDistribution(counts, target);
}

TEST(VerifyRejection, AllAcceptedDrawsBonusFromLastNode) {
  Rng setup(606);
  Target target = Target::Random(setup);
  // p0 puts all its mass on token 3, so the draft 3 is always accepted; the bonus comes from
  // p1[3].
  target.p0 = Dist(kVocab, 0.0);
  target.p0[3] = 1.0;
  const Counts counts = RunTrials(
      target, [&](Rng&) { return *DraftTree::Chain({3}, Limits(kVocab)); }, Temperature1(), kTrials, 6);
  EXPECT_EQ(counts.first_accepted, counts.trials);
  EXPECT_GT(ChiSquarePValue(counts.second[3], target.p1[3]), kChiSquareMinPValue);
}

TEST(VerifyRejection, EmptyTreeSamplesFromTarget) {
  Rng setup(707);
  const Target target = Target::Random(setup);
  const Counts counts = RunTrials(
      target, [&](Rng&) { return DraftTree(); }, Temperature1(), kTrials, 7);
  EXPECT_EQ(counts.first_accepted, 0);
  EXPECT_GT(ChiSquarePValue(counts.first, target.p0), kChiSquareMinPValue);
}

TEST(VerifyRejection, TargetWithTopKAndTemperature) {
  Rng setup(808);
  const Target target = Target::Random(setup);
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = 3;
  params.top_p = 0.9f;
  // q has full support, so it often proposes tokens the cut target forbids.
  const Dist q1 = RandomDist(setup);
  std::vector<Dist> q2;
  for (int a = 0; a < kVocab; ++a) q2.push_back(RandomDist(setup));
  const Counts counts = RunTrials(
      target,
      [&](Rng& rng) {
        const int32_t x1 = Draw(q1, rng);
        const int32_t x2 = Draw(q2[x1], rng);
        return *DraftTree::Chain({x1, x2}, Limits(kVocab), {Sparse(q1), Sparse(q2[x1])});
      },
      params, kTrials, 8);
  ExpectTargetDistribution(counts, target.Cut(params));
}

TEST(VerifyRejection, ReproducibleForASeed) {
  Rng setup(909);
  const Target target = Target::Random(setup);
  const Dist q = RandomDist(setup);
  std::vector<DraftTree> trees;
  for (int t = 0; t < 200; ++t) {
    DraftTreeBuilder builder;
    for (int s = 0; s < 2; ++s) {
      const int32_t node = builder.Add(-1, Draw(q, setup), Sparse(q));
      builder.Add(node, Draw(q, setup), Sparse(q));
    }
    trees.push_back(*std::move(builder).Build(Limits(kVocab)));
  }
  auto run = [&](uint64_t seed) {
    Rng rng(seed);
    std::vector<std::vector<int32_t>> out;
    for (const DraftTree& tree : trees) {
      out.push_back(
          VerifyRejection(tree, target.Logits(tree), kVocab, Temperature1(), rng)->tokens);
    }
    return out;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST(VerifyRejection, RejectsBadInput) {
  const DraftTree chain = *DraftTree::Chain({1}, Limits(kVocab));
  Rng rng(1);
  const std::vector<float> logits(2 * kVocab, 0.0f);
  SamplingParams bad = Temperature1();
  bad.top_k = -1;
  EXPECT_EQ(VerifyRejection(chain, logits, kVocab, bad, rng).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(VerifyRejection(chain, std::vector<float>(kVocab, 0.0f), kVocab, Temperature1(), rng)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(VerifyRejection(chain, logits, kVocab, Temperature1(), rng).ok());
}

}  // namespace
}  // namespace splitspec::spec
