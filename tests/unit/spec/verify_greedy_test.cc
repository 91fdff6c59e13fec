// Tests of greedy verification: random trees against a simulation of the target run as a
// plain chain, the bonus-token cases, and bad input.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/engine/sampling/sampler.h"
#include "common/spec/draft_tree.h"
#include "common/spec/verify.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/spec/tree_limits.h"

namespace splitspec::spec {
namespace {

using ::testing::ElementsAre;

// A deterministic "target model": its greedy next token after a context is a hash of the
// context (small vocab, so drafts often match).
int32_t TargetNext(const std::vector<int32_t>& context, int32_t vocab) {
  uint64_t h = 1469598103934665603ULL;
  for (int32_t t : context) h = (h ^ static_cast<uint64_t>(t + 1)) * 1099511628211ULL;
  h ^= h >> 29;
  return static_cast<int32_t>(h % vocab);
}

// Logits for every row of `tree` (root first) whose argmax is TargetNext of that row's
// context, with random lower logits elsewhere.
std::vector<float> TargetLogits(const DraftTree& tree, int32_t vocab, engine::Rng& rng) {
  std::vector<float> logits;
  for (int32_t node = -1; node < tree.size(); ++node) {
    std::vector<int32_t> context;
    for (int32_t n : tree.PathTo(node)) context.push_back(tree.token(n));
    const int32_t choice = TargetNext(context, vocab);
    for (int32_t v = 0; v < vocab; ++v) {
      logits.push_back(v == choice ? 2.0f : static_cast<float>(rng.NextUniform()));
    }
  }
  return logits;
}

using testing::Limits;

TEST(VerifyGreedy, RandomTreesMatchTargetRunAsChain) {
  engine::Rng rng(17);
  int n_full_accepts = 0, n_partial = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int32_t vocab = 2 + static_cast<int32_t>(rng.NextU64() % 4);
    const int n = static_cast<int>(rng.NextU64() % 12);
    std::vector<int32_t> tokens, parents;
    for (int i = 0; i < n; ++i) {
      tokens.push_back(static_cast<int32_t>(rng.NextU64() % vocab));
      parents.push_back(static_cast<int32_t>(rng.NextU64() % (i + 1)) - 1);
    }
    const absl::StatusOr<DraftTree> tree = DraftTree::Create(tokens, parents, {}, Limits(vocab));
    ASSERT_TRUE(tree.ok());
    const std::vector<float> logits = TargetLogits(*tree, vocab, rng);
    const absl::StatusOr<VerifyOutcome> result = VerifyGreedy(*tree, logits, vocab);
    ASSERT_TRUE(result.ok()) << result.status();

    // Reference: the target's own greedy continuation, then the deepest node (lowest index
    // among equals) whose root-to-node tokens are a prefix of it.
    std::vector<int32_t> continuation;
    for (int d = 0; d <= n; ++d) continuation.push_back(TargetNext(continuation, vocab));
    int32_t best = -1, best_depth = 0;
    for (int32_t i = 0; i < n; ++i) {
      std::vector<int32_t> path_tokens;
      for (int at = i; at >= 0; at = parents[at])
        path_tokens.insert(path_tokens.begin(), tokens[at]);
      const bool matches = std::equal(path_tokens.begin(), path_tokens.end(), continuation.begin());
      if (matches && static_cast<int32_t>(path_tokens.size()) > best_depth) {
        best = i;
        best_depth = static_cast<int32_t>(path_tokens.size());
      }
    }
    ASSERT_EQ(result->accept_length(), best_depth);
    EXPECT_EQ(result->last_node(), best);
    EXPECT_EQ(result->tokens,
              std::vector<int32_t>(continuation.begin(), continuation.begin() + best_depth + 1));
    // The accepted nodes form a root-first path.
    for (int32_t j = 0; j < result->accept_length(); ++j) {
      EXPECT_EQ(tree->parent(result->accepted_nodes[j]),
                j == 0 ? -1 : result->accepted_nodes[j - 1]);
    }
    n_full_accepts += best_depth > 0 && best_depth == tree->max_depth();
    n_partial += best_depth > 0 && best_depth < tree->max_depth();
  }
  // The random cases exercised both full and partial acceptance.
  EXPECT_GT(n_full_accepts, 50);
  EXPECT_GT(n_partial, 50);
}

// One-hot-ish logits rows for a chain: row r's argmax is choices[r].
std::vector<float> Rows(const std::vector<int32_t>& choices, int32_t vocab) {
  std::vector<float> logits;
  for (int32_t c : choices) {
    for (int32_t v = 0; v < vocab; ++v) logits.push_back(v == c ? 1.0f : 0.0f);
  }
  return logits;
}

TEST(VerifyGreedy, ChainAllAcceptedEmitsBonus) {
  const absl::StatusOr<DraftTree> chain = DraftTree::Chain({3, 1, 4}, Limits(5));
  ASSERT_TRUE(chain.ok());
  // Target predicts 3 after the context, 1 after 3, 4 after 1, then 0 (the bonus).
  const absl::StatusOr<VerifyOutcome> r = VerifyGreedy(*chain, Rows({3, 1, 4, 0}, 5), 5);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->accepted_nodes, ElementsAre(0, 1, 2));
  EXPECT_THAT(r->tokens, ElementsAre(3, 1, 4, 0));
  EXPECT_EQ(r->accept_length(), 3);
}

TEST(VerifyGreedy, ChainNoneAcceptedEmitsTargetToken) {
  const absl::StatusOr<DraftTree> chain = DraftTree::Chain({3, 1, 4}, Limits(5));
  ASSERT_TRUE(chain.ok());
  const absl::StatusOr<VerifyOutcome> r = VerifyGreedy(*chain, Rows({2, 1, 4, 0}, 5), 5);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->accepted_nodes.empty());
  EXPECT_THAT(r->tokens, ElementsAre(2));
}

TEST(VerifyGreedy, ChainStopsAtFirstMismatch) {
  const absl::StatusOr<DraftTree> chain = DraftTree::Chain({3, 1, 4}, Limits(5));
  ASSERT_TRUE(chain.ok());
  // Node 2's row would match, but node 1 (token 1) is rejected for 2 first.
  const absl::StatusOr<VerifyOutcome> r = VerifyGreedy(*chain, Rows({3, 2, 4, 0}, 5), 5);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->accepted_nodes, ElementsAre(0));
  EXPECT_THAT(r->tokens, ElementsAre(3, 2));
}

TEST(VerifyGreedy, EmptyTreeIsPlainDecode) {
  const DraftTree empty;
  const absl::StatusOr<VerifyOutcome> r = VerifyGreedy(empty, Rows({4}, 5), 5);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->accepted_nodes.empty());
  EXPECT_THAT(r->tokens, ElementsAre(4));
}

TEST(VerifyGreedy, TreeFollowsMatchingSibling) {
  // Root children: 0 (token 1), 1 (token 2); node 2 (token 3) under 1; node 3 (token 0) under 0.
  const absl::StatusOr<DraftTree> tree =
      DraftTree::Create({1, 2, 3, 0}, {-1, -1, 1, 0}, {}, Limits(4));
  ASSERT_TRUE(tree.ok());
  // Rows: root -> 2, node0 -> 0, node1 -> 3, node2 -> 1, node3 -> 0.
  const absl::StatusOr<VerifyOutcome> r = VerifyGreedy(*tree, Rows({2, 0, 3, 1, 0}, 4), 4);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->accepted_nodes, ElementsAre(1, 2));
  EXPECT_THAT(r->tokens, ElementsAre(2, 3, 1));
  EXPECT_THAT(r->AcceptedRowsWithRoot(), ElementsAre(0, 2, 3));
}

TEST(VerifyGreedy, DuplicateSiblingsTakeTheDeeperMatch) {
  // Two root children with token 1; only the second has a matching child.
  const absl::StatusOr<DraftTree> tree = DraftTree::Create({1, 1, 2}, {-1, -1, 1}, {}, Limits(3));
  ASSERT_TRUE(tree.ok());
  const absl::StatusOr<VerifyOutcome> r = VerifyGreedy(*tree, Rows({1, 2, 2, 0}, 3), 3);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->accepted_nodes, ElementsAre(1, 2));
  EXPECT_THAT(r->tokens, ElementsAre(1, 2, 0));
}

TEST(VerifyGreedy, RejectsBadInput) {
  const absl::StatusOr<DraftTree> chain = DraftTree::Chain({3, 1}, Limits(5));
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(VerifyGreedy(*chain, Rows({3, 1}, 5), 5).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(VerifyGreedy(*chain, Rows({3, 1, 0}, 6), 6).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(VerifyGreedy(*chain, {}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Verify, GreedyParamsDispatchToGreedyWithoutRandomness) {
  const absl::StatusOr<DraftTree> chain = DraftTree::Chain({3, 1}, Limits(5));
  ASSERT_TRUE(chain.ok());
  engine::Rng rng(3), untouched(3);
  engine::SamplingParams greedy;
  const absl::StatusOr<VerifyOutcome> r = Verify(*chain, Rows({3, 0, 2}, 5), 5, greedy, rng);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->tokens, ElementsAre(3, 0));
  EXPECT_EQ(rng.NextU64(), untouched.NextU64());
  engine::SamplingParams bad;
  bad.top_p = 0;
  EXPECT_EQ(Verify(*chain, Rows({3, 0, 2}, 5), 5, bad, rng).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace splitspec::spec
