// Tests of common/spec/ngram_matcher: examples, and random histories (small alphabets so
// matches occur) with appends and truncations against a brute-force matcher.
#include "common/spec/ngram_matcher.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/engine/sampling/sampler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::spec {
namespace {

using ::testing::ElementsAre;

NgramMatcher Make(int32_t min_n, int32_t max_n) {
  NgramMatcherOptions options;
  options.min_n = min_n;
  options.max_n = max_n;
  absl::StatusOr<NgramMatcher> matcher = NgramMatcher::Create(options);
  EXPECT_TRUE(matcher.ok()) << matcher.status();
  return *std::move(matcher);
}

// Scans every length from max_n down and every earlier end position from the most recent.
NgramMatch BruteForce(const std::vector<int32_t>& h, int32_t min_n, int32_t max_n, int32_t k) {
  NgramMatch match;
  const int64_t len = static_cast<int64_t>(h.size());
  if (k <= 0) return match;
  for (int32_t n = max_n; n >= min_n; --n) {
    if (n > len - 1) continue;
    for (int64_t end = len - 2; end >= n - 1; --end) {
      bool same = true;
      for (int32_t i = 0; i < n && same; ++i) same = h[end - i] == h[len - 1 - i];
      if (!same) continue;
      match.n = n;
      match.source_end = end;
      for (int64_t j = end + 1; j < len && j <= end + k; ++j) match.tokens.push_back(h[j]);
      return match;
    }
  }
  return match;
}

TEST(NgramMatcher, RejectsBadOptions) {
  for (auto [min_n, max_n] : std::vector<std::pair<int, int>>{{0, 3}, {3, 2}, {1, 65}, {-1, 1}}) {
    NgramMatcherOptions options;
    options.min_n = min_n;
    options.max_n = max_n;
    EXPECT_EQ(NgramMatcher::Create(options).status().code(), absl::StatusCode::kInvalidArgument)
        << min_n << " " << max_n;
  }
}

TEST(NgramMatcher, ProposesContinuationOfMostRecentLongestMatch) {
  NgramMatcher m = Make(1, 3);
  // a b c d | a b x | a b c ... suffix "a b c" occurred at 0..2, followed by d a b x.
  m.Append(std::vector<int32_t>{1, 2, 3, 4, 1, 2, 9, 1, 2, 3});
  NgramMatch match = m.Propose(4);
  EXPECT_EQ(match.n, 3);
  EXPECT_EQ(match.source_end, 2);
  EXPECT_THAT(match.tokens, ElementsAre(4, 1, 2, 9));
  // History a b c d a b x a b: "x a b" never occurred before; "a b" did, most recently at
  // 4..5 (7..8 is the suffix itself), followed by x a.
  ASSERT_TRUE(m.Truncate(9).ok());
  match = m.Propose(2);
  EXPECT_EQ(match.n, 2);
  EXPECT_EQ(match.source_end, 5);
  EXPECT_THAT(match.tokens, ElementsAre(9, 1));
  // Proposals stop at the end of the history.
  m.Append(std::vector<int32_t>{9});
  match = m.Propose(10);
  EXPECT_EQ(match.n, 3);
  EXPECT_THAT(match.tokens, ElementsAre(1, 2, 9));
}

TEST(NgramMatcher, OverlappingOccurrenceAndNoMatch) {
  NgramMatcher m = Make(2, 2);
  m.Append(std::vector<int32_t>{5, 5, 5});
  NgramMatch match = m.Propose(3);
  EXPECT_EQ(match.n, 2);
  EXPECT_EQ(match.source_end, 1);
  EXPECT_THAT(match.tokens, ElementsAre(5));
  m.Append(7);
  match = m.Propose(3);
  EXPECT_EQ(match.n, 0);
  EXPECT_TRUE(match.tokens.empty());
  EXPECT_TRUE(m.Propose(0).tokens.empty());
  NgramMatcher empty = Make(1, 2);
  EXPECT_TRUE(empty.Propose(3).tokens.empty());
}

TEST(NgramMatcher, TruncateBounds) {
  NgramMatcher m = Make(1, 2);
  m.Append(std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(m.Truncate(4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Truncate(-1).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(m.Truncate(0).ok());
  EXPECT_EQ(m.size(), 0);
  m.Append(std::vector<int32_t>{4, 4});
  EXPECT_THAT(m.Propose(2).tokens, ElementsAre(4));
}

TEST(NgramMatcher, RandomHistoriesMatchBruteForce) {
  engine::Rng rng(4242);
  int n_matches = 0, n_long_matches = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int32_t alphabet = 2 + static_cast<int32_t>(rng.NextU64() % 4);
    const int32_t min_n = 1 + static_cast<int32_t>(rng.NextU64() % 3);
    const int32_t max_n = min_n + static_cast<int32_t>(rng.NextU64() % 5);
    NgramMatcher m = Make(min_n, max_n);
    std::vector<int32_t> history;
    for (int op = 0; op < 300; ++op) {
      const uint64_t kind = rng.NextU64() % 10;
      if (kind < 6) {
        // Append a few tokens (sometimes a copy of an earlier stretch, like real text).
        const int count = 1 + static_cast<int>(rng.NextU64() % 4);
        std::vector<int32_t> add;
        for (int i = 0; i < count; ++i) {
          if (!history.empty() && rng.NextU64() % 2 == 0) {
            add.push_back(history[rng.NextU64() % history.size()]);
          } else {
            add.push_back(static_cast<int32_t>(rng.NextU64() % alphabet));
          }
        }
        m.Append(add);
        history.insert(history.end(), add.begin(), add.end());
      } else if (kind < 8) {
        // Roll back a rejected tail.
        const int64_t new_size =
            history.empty() ? 0 : static_cast<int64_t>(rng.NextU64() % (history.size() + 1));
        ASSERT_TRUE(m.Truncate(new_size).ok());
        history.resize(new_size);
      }
      ASSERT_EQ(m.size(), static_cast<int64_t>(history.size()));
      const int32_t k = static_cast<int32_t>(rng.NextU64() % 7);
      const NgramMatch got = m.Propose(k);
      const NgramMatch want = BruteForce(history, min_n, max_n, k);
      ASSERT_EQ(got.n, want.n) << "trial " << trial << " op " << op;
      ASSERT_EQ(got.source_end, want.source_end);
      ASSERT_EQ(got.tokens, want.tokens);
      n_matches += got.n > 0;
      n_long_matches += got.n > min_n;
    }
  }
  EXPECT_GT(n_matches, 1000);
  EXPECT_GT(n_long_matches, 500);
}

TEST(NgramMatcher, LongHistoryQueriesStayCorrect) {
  // A long repetitive history: the index answers like the brute force at every step.
  NgramMatcher m = Make(2, 4);
  std::vector<int32_t> history;
  engine::Rng rng(9);
  for (int i = 0; i < 3000; ++i) {
    const int32_t t = i % 97 < 50 ? (i % 13) : static_cast<int32_t>(rng.NextU64() % 50);
    m.Append(t);
    history.push_back(t);
    if (i % 50 == 0) {
      const NgramMatch got = m.Propose(5);
      const NgramMatch want = BruteForce(history, 2, 4, 5);
      ASSERT_EQ(got.n, want.n) << i;
      ASSERT_EQ(got.source_end, want.source_end) << i;
      ASSERT_EQ(got.tokens, want.tokens) << i;
    }
  }
}

}  // namespace
}  // namespace splitspec::spec
