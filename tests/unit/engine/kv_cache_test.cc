// Block bookkeeping of the paged KV cache: allocation, truncation, commit, exhaustion, release.
#include "common/engine/kv/kv_cache.h"

#include <gtest/gtest.h>

namespace splitspec::engine {
namespace {

class KvCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = CreateCpuBackend();
    absl::StatusOr<std::unique_ptr<KvCache>> kv = KvCache::Create(*backend_, {2, 2, 4, 8, 16});
    ASSERT_TRUE(kv.ok()) << kv.status();
    kv_ = std::move(*kv);
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KvCache> kv_;
};

TEST_F(KvCacheTest, AppendAllocatesWholeBlocks) {
  ASSERT_TRUE(kv_->AddSequence(1).ok());
  EXPECT_EQ(kv_->BlocksNeeded(1, 17), 2);
  ASSERT_TRUE(kv_->Append(1, 17).ok());
  EXPECT_EQ(kv_->Length(1), 17);
  EXPECT_EQ(kv_->BlockTable(1).size(), 2u);
  EXPECT_EQ(kv_->free_blocks(), 6);
  ASSERT_TRUE(kv_->Append(1, 15).ok());  // fills the second block exactly
  EXPECT_EQ(kv_->free_blocks(), 6);
  EXPECT_EQ(kv_->BlocksNeeded(1, 1), 1);
}

TEST_F(KvCacheTest, TruncateFreesBlocksNoLongerNeeded) {
  ASSERT_TRUE(kv_->AddSequence(1).ok());
  ASSERT_TRUE(kv_->Append(1, 40).ok());  // 3 blocks
  EXPECT_EQ(kv_->free_blocks(), 5);
  ASSERT_TRUE(kv_->Truncate(1, 16).ok());
  EXPECT_EQ(kv_->free_blocks(), 7);
  EXPECT_EQ(kv_->Length(1), 16);
  EXPECT_EQ(kv_->Truncate(1, 17).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv_->Truncate(99, 0).code(), absl::StatusCode::kNotFound);
}

TEST_F(KvCacheTest, ExhaustionLeavesStateUnchanged) {
  ASSERT_TRUE(kv_->AddSequence(1).ok());
  ASSERT_TRUE(kv_->AddSequence(2).ok());
  ASSERT_TRUE(kv_->Append(1, 16 * 6).ok());
  const absl::Status status = kv_->Append(2, 16 * 3);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(kv_->Length(2), 0);
  EXPECT_EQ(kv_->free_blocks(), 2);
  kv_->Release(1);
  EXPECT_EQ(kv_->free_blocks(), 8);
  EXPECT_FALSE(kv_->HasSequence(1));
  EXPECT_TRUE(kv_->Append(2, 16 * 3).ok());
}

TEST_F(KvCacheTest, DuplicateSequenceRejected) {
  ASSERT_TRUE(kv_->AddSequence(5).ok());
  EXPECT_EQ(kv_->AddSequence(5).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(KvCacheTest, CommitPathMovesAcceptedRowsIntoPlace) {
  ASSERT_TRUE(kv_->AddSequence(1).ok());
  ASSERT_TRUE(kv_->Append(1, 20).ok());  // 14 context + 6 nodes
  // Tag each slot's rows with its position so the move is visible.
  for (int layer = 0; layer < 2; ++layer) {
    for (int pos = 0; pos < 20; ++pos) {
      for (int c = 0; c < 8; ++c) {
        kv_->k(layer).row(kv_->Slot(1, pos))[c] = static_cast<float>(pos * 100 + layer);
        kv_->v(layer).row(kv_->Slot(1, pos))[c] = static_cast<float>(-pos * 100 - layer);
      }
    }
  }
  const std::vector<int32_t> accepted = {0, 2, 5};
  ASSERT_TRUE(kv_->CommitPath(1, 14, accepted).ok());
  EXPECT_EQ(kv_->Length(1), 17);
  for (int layer = 0; layer < 2; ++layer) {
    for (int i = 0; i < 3; ++i) {
      const int src_pos = 14 + accepted[i];
      EXPECT_EQ(kv_->k(layer).row(kv_->Slot(1, 14 + i))[3], static_cast<float>(src_pos * 100 + layer));
      EXPECT_EQ(kv_->v(layer).row(kv_->Slot(1, 14 + i))[3], static_cast<float>(-src_pos * 100 - layer));
    }
    EXPECT_EQ(kv_->k(layer).row(kv_->Slot(1, 13))[0], static_cast<float>(13 * 100 + layer));  // context untouched
  }
}

TEST_F(KvCacheTest, CommitPathRejectsBadNodes) {
  ASSERT_TRUE(kv_->AddSequence(1).ok());
  ASSERT_TRUE(kv_->Append(1, 10).ok());
  EXPECT_EQ(kv_->CommitPath(1, 5, std::vector<int32_t>{0, 5}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv_->CommitPath(1, 5, std::vector<int32_t>{2, 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv_->CommitPath(1, 11, std::vector<int32_t>{}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(kv_->CommitPath(1, 5, std::vector<int32_t>{}).ok());  // reject everything
  EXPECT_EQ(kv_->Length(1), 5);
}

}  // namespace
}  // namespace splitspec::engine
