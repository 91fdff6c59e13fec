// The suffix proposer: drafts from the request's own history and from other requests it has
// seen finish, trees of the most frequent continuations within the shape, and a shared cache
// that stays within its bound however many requests go through it.
#include "drafter/suffix_proposer.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tests/unit/drafter/propose_items.h"

namespace splitspec::drafter {
namespace {

using testing::Task;

TEST(SuffixProposerTest, DraftsFromAnotherRequestThatFinished) {
  auto proposer = SuffixProposer::Create(SuffixOptions{});
  ASSERT_TRUE(proposer.ok());
  const std::vector<int32_t> first = {7, 8, 9, 10, 11, 12, 13, 14};
  ASSERT_TRUE((*proposer)->Propose({Task(1, &first, {3, 1, 0})}).ok());
  (*proposer)->Release(1);
  EXPECT_EQ((*proposer)->cached_tokens(), 8);
  // A new request whose suffix occurred in the finished one: its continuation is proposed
  // although the new request never saw it.
  const std::vector<int32_t> second = {1, 2, 9, 10};
  auto out = (*proposer)->Propose({Task(2, &second, {3, 1, 0})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].tokens, (std::vector<int32_t>{11, 12, 13}));
  ASSERT_EQ((*out)[0].scores.size(), 3u);
  EXPECT_FLOAT_EQ((*out)[0].scores[0], 1.0f);
}

TEST(SuffixProposerTest, TreesHoldTheMostFrequentContinuations) {
  auto proposer = SuffixProposer::Create(SuffixOptions{});
  ASSERT_TRUE(proposer.ok());
  // After "5": 6 three times, 7 once.
  const std::vector<int32_t> history = {5, 6, 1, 5, 6, 2, 5, 7, 3, 5, 6, 4, 5};
  auto out = (*proposer)->Propose({Task(1, &history, {2, 3, 8})});
  ASSERT_TRUE(out.ok());
  const spec::DraftProposal& d = (*out)[0];
  ASSERT_GE(d.tokens.size(), 2u);
  EXPECT_EQ(d.tokens[0], 6);
  EXPECT_FLOAT_EQ(d.scores[0], 3.0f / 4.0f);
  int roots = 0, deepest = 0;
  std::vector<int> depth(d.tokens.size());
  for (size_t j = 0; j < d.tokens.size(); ++j) {
    ASSERT_LT(d.parents[j], static_cast<int32_t>(j));
    depth[j] = d.parents[j] < 0 ? 1 : depth[d.parents[j]] + 1;
    deepest = std::max(deepest, depth[j]);
    roots += d.parents[j] < 0;
  }
  EXPECT_EQ(roots, 2);  // 6 and 7
  EXPECT_LE(deepest, 2);
  EXPECT_LE(d.tokens.size(), 8u);
}

TEST(SuffixProposerTest, TheSharedCacheStaysWithinItsBound) {
  SuffixOptions options;
  options.cache_tokens = 1000;
  auto proposer = SuffixProposer::Create(options);
  ASSERT_TRUE(proposer.ok());
  std::mt19937 rng(3);
  for (int r = 0; r < 300; ++r) {
    std::vector<int32_t> history(20 + rng() % 60);
    for (int32_t& t : history) t = static_cast<int32_t>(rng() % 50);
    ASSERT_TRUE((*proposer)->Propose({Task(r, &history, {4, 2, 6})}).ok());
    (*proposer)->Release(r);
    EXPECT_LE((*proposer)->cached_tokens(), 1000);
  }
  EXPECT_GT((*proposer)->cached_tokens(), 900);
  EXPECT_FALSE(SuffixProposer::Create(SuffixOptions{1, 16, -1, 64}).ok());
}

}  // namespace
}  // namespace splitspec::drafter
