// Tests of common/spec/proposal_tree: DraftProposal <-> DraftTree conversions.
#include "common/spec/proposal_tree.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/spec/tree_limits.h"

namespace splitspec::spec {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::Limits;

TEST(ProposalTree, WithoutProbabilities) {
  DraftProposal proposal;
  proposal.tokens = {2, 0, 1};
  proposal.parents = {-1, 0, 0};
  const absl::StatusOr<DraftTree> tree = DraftTreeFromProposal(proposal, Limits(3));
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_THAT(tree->Children(0), ElementsAre(1, 2));
  EXPECT_FALSE(tree->has_draft_probs(0));
  const DraftProposal back = ProposalFromDraftTree(*tree);
  EXPECT_EQ(back.tokens, proposal.tokens);
  EXPECT_EQ(back.parents, proposal.parents);
  EXPECT_TRUE(back.probs.empty());
}

TEST(ProposalTree, DenseProbabilitiesBecomeSparseAndBack) {
  DraftProposal proposal;
  proposal.tokens = {2, 1};
  proposal.parents = {-1, 0};
  proposal.probs = {0.25f, 0.0f, 0.75f, 0.0f,   // node 0
                    0.0f,  0.5f, 0.0f,  0.5f};  // node 1
  const absl::StatusOr<DraftTree> tree = DraftTreeFromProposal(proposal, Limits(4));
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_THAT(tree->draft_probs(0).token_ids, ElementsAre(0, 2));
  EXPECT_THAT(tree->draft_probs(0).probs, ElementsAre(0.25f, 0.75f));
  EXPECT_THAT(tree->draft_probs(1).token_ids, ElementsAre(1, 3));
  EXPECT_EQ(ProposalFromDraftTree(*tree).probs, proposal.probs);
}

TEST(ProposalTree, NodesWithoutDistributionGetOneHotRows) {
  DraftTreeBuilder builder;
  builder.Add(-1, 1);
  builder.Add(0, 2, DraftDistribution{{2, 0}, {3.0f, 1.0f}});  // unnormalised
  const absl::StatusOr<DraftTree> tree = std::move(builder).Build(Limits(3));
  ASSERT_TRUE(tree.ok());
  EXPECT_THAT(ProposalFromDraftTree(*tree).probs, ElementsAre(0, 1, 0, 0.25f, 0, 0.75f));
}

// Found by fuzzing (tests/fuzz/corpus/draft_tree/crash-own-token-underflows): normalising a
// row whose node token is tiny next to huge entries rounded it to 0 in float, and the
// converted proposal no longer passed the tree check.
TEST(ProposalTree, TinyProbabilityNextToHugeOnesStaysPositive) {
  DraftProposal proposal;
  proposal.tokens = {0};
  proposal.parents = {-1};
  proposal.probs = {1e-40f, 3e38f, 3e38f, 0.0f};
  const absl::StatusOr<DraftTree> tree = DraftTreeFromProposal(proposal, Limits(4));
  ASSERT_TRUE(tree.ok()) << tree.status();
  const DraftProposal back = ProposalFromDraftTree(*tree);
  EXPECT_GT(back.probs[0], 0.0f);
  EXPECT_FLOAT_EQ(back.probs[1], 0.5f);
  EXPECT_EQ(back.probs[3], 0.0f);
  EXPECT_TRUE(DraftTreeFromProposal(back, Limits(4)).ok());
}

TEST(ProposalTree, RejectsBadProbabilitySizeAndBadTrees) {
  DraftProposal proposal;
  proposal.tokens = {2, 1};
  proposal.parents = {-1, 0};
  proposal.probs = {0.5f, 0.5f, 0.0f};
  absl::StatusOr<DraftTree> tree = DraftTreeFromProposal(proposal, Limits(4));
  ASSERT_FALSE(tree.ok());
  EXPECT_EQ(tree.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tree.status().message()), HasSubstr("draft probabilities have 3"));
  proposal.probs.clear();
  proposal.parents = {-1, 1};
  EXPECT_EQ(DraftTreeFromProposal(proposal, Limits(4)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace splitspec::spec
