// Tests of common/spec/acceptance_stats: arithmetic on scripted verification steps.
#include "common/spec/acceptance_stats.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::spec {
namespace {

using ::testing::ElementsAre;

TEST(AcceptanceStats, EmptyHasZeroRates) {
  const AcceptanceStats stats;
  EXPECT_EQ(stats.proposals(), 0);
  EXPECT_EQ(stats.MeanAcceptLength(), 0.0);
  EXPECT_EQ(stats.MeanTokensPerStep(), 0.0);
  EXPECT_EQ(stats.AcceptanceRate(), 0.0);
  EXPECT_EQ(stats.PositionAcceptanceRate(0), 0.0);
}

TEST(AcceptanceStats, ScriptedSteps) {
  AcceptanceStats stats;
  ASSERT_TRUE(stats.Record(5, 5, 3).ok());  // chain of 5, 3 accepted
  ASSERT_TRUE(stats.Record(3, 3, 0).ok());  // chain of 3, none accepted
  ASSERT_TRUE(stats.Record(0, 0, 0).ok());  // plain decode: not a proposal
  ASSERT_TRUE(stats.Record(7, 3, 3).ok());  // tree of 7 nodes, depth 3, full path accepted
  EXPECT_EQ(stats.proposals(), 3);
  EXPECT_EQ(stats.drafted_tokens(), 15);
  EXPECT_EQ(stats.accepted_tokens(), 6);
  EXPECT_DOUBLE_EQ(stats.MeanAcceptLength(), 2.0);
  EXPECT_DOUBLE_EQ(stats.MeanTokensPerStep(), 3.0);
  EXPECT_DOUBLE_EQ(stats.AcceptanceRate(), 6.0 / 15.0);
  EXPECT_THAT(stats.offered_at_position(), ElementsAre(3, 3, 3, 1, 1));
  EXPECT_THAT(stats.accepted_at_position(), ElementsAre(2, 2, 2, 0, 0));
  EXPECT_THAT(stats.accept_length_histogram(), ElementsAre(1, 0, 0, 2));
  EXPECT_DOUBLE_EQ(stats.PositionAcceptanceRate(0), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(stats.PositionAcceptanceRate(3), 0.0);
  EXPECT_DOUBLE_EQ(stats.PositionAcceptanceRate(9), 0.0);
}

TEST(AcceptanceStats, RejectsInconsistentRecords) {
  AcceptanceStats stats;
  EXPECT_EQ(stats.Record(3, 3, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stats.Record(3, 4, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stats.Record(-1, 0, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stats.Record(2, 0, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stats.Record(2, 2, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stats.proposals(), 0);
  EXPECT_TRUE(stats.accept_length_histogram().empty());
}

TEST(AcceptanceStats, MergeEqualsRecordingEverythingInOne) {
  const std::vector<std::vector<int>> steps = {
      {4, 4, 2}, {2, 2, 2}, {9, 3, 1}, {1, 1, 0}, {6, 6, 6}};
  AcceptanceStats all, first, second;
  for (size_t i = 0; i < steps.size(); ++i) {
    ASSERT_TRUE(all.Record(steps[i][0], steps[i][1], steps[i][2]).ok());
    ASSERT_TRUE((i < 2 ? first : second).Record(steps[i][0], steps[i][1], steps[i][2]).ok());
  }
  first.Merge(second);
  EXPECT_EQ(first.proposals(), all.proposals());
  EXPECT_EQ(first.drafted_tokens(), all.drafted_tokens());
  EXPECT_EQ(first.accepted_tokens(), all.accepted_tokens());
  EXPECT_EQ(first.offered_at_position(), all.offered_at_position());
  EXPECT_EQ(first.accepted_at_position(), all.accepted_at_position());
  EXPECT_EQ(first.accept_length_histogram(), all.accept_length_histogram());
  // (2 + 2 + 1 + 0 + 6) / 5
  EXPECT_DOUBLE_EQ(all.MeanAcceptLength(), 11.0 / 5.0);
}

TEST(AcceptanceStats, RecordsTreeAndResult) {
  DraftTreeLimits limits;
  limits.vocab_size = 8;
  const absl::StatusOr<DraftTree> tree =
      DraftTree::Create({1, 2, 3, 4}, {-1, -1, 0, 2}, {}, limits);
  ASSERT_TRUE(tree.ok());
  VerifyOutcome result;
  result.accepted_nodes = {0, 2};
  result.tokens = {1, 3, 5};
  AcceptanceStats stats;
  ASSERT_TRUE(stats.Record(*tree, result).ok());
  EXPECT_EQ(stats.drafted_tokens(), 4);
  EXPECT_EQ(stats.accepted_tokens(), 2);
  EXPECT_THAT(stats.offered_at_position(), ElementsAre(1, 1, 1));
  EXPECT_THAT(stats.accepted_at_position(), ElementsAre(1, 1, 0));
}

}  // namespace
}  // namespace splitspec::spec
