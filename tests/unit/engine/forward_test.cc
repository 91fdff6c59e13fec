// Forward's input validation, and that a failed forward leaves the cache untouched.
#include <gtest/gtest.h>

#include "tests/unit/engine/test_model.h"

namespace splitspec::engine {
namespace {

using testing::LoadTinyModel;

class ForwardValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_ = LoadTinyModel({}, 4);
    ASSERT_TRUE(m_.kv->AddSequence(1).ok());
    ASSERT_TRUE(m_.kv->AddSequence(2).ok());
  }
  absl::StatusCode Run(std::vector<SequenceStep> steps) {
    ForwardResult result;
    return m_.model->Forward(steps, *m_.kv, &result).code();
  }
  testing::LoadedModel m_;
};

TEST_F(ForwardValidationTest, RejectsBadInputWithoutTouchingTheCache) {
  const int vocab = m_.model->config().vocab_size;
  EXPECT_EQ(Run({SequenceStep{9, {1}, {}, {}}}), absl::StatusCode::kInvalidArgument);              // unknown seq
  EXPECT_EQ(Run({SequenceStep{1, {vocab}, {}, {}}}), absl::StatusCode::kInvalidArgument);          // token id
  EXPECT_EQ(Run({SequenceStep{1, {-1}, {}, {}}}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Run({SequenceStep{1, {1, 2}, {-1, 1}, {}}}), absl::StatusCode::kInvalidArgument);     // parent not earlier
  EXPECT_EQ(Run({SequenceStep{1, {1, 2}, {-1}, {}}}), absl::StatusCode::kInvalidArgument);        // parents size
  EXPECT_EQ(Run({SequenceStep{1, {1}, {}, {1}}}), absl::StatusCode::kInvalidArgument);            // logit node
  EXPECT_EQ(Run({SequenceStep{1, {}, {}, {}}}), absl::StatusCode::kInvalidArgument);              // no tokens
  EXPECT_EQ(Run({SequenceStep{1, {1}, {}, {}}, SequenceStep{1, {2}, {}, {}}}),
            absl::StatusCode::kInvalidArgument);                                                  // duplicate
  // 4 blocks of 16 tokens: 70 tokens cannot fit.
  EXPECT_EQ(Run({SequenceStep{1, std::vector<int32_t>(40, 3), {}, {}}, SequenceStep{2, std::vector<int32_t>(30, 3), {}, {}}}),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m_.kv->Length(1), 0);
  EXPECT_EQ(m_.kv->Length(2), 0);
  EXPECT_EQ(m_.kv->free_blocks(), 4);
  EXPECT_EQ(Run({SequenceStep{1, std::vector<int32_t>(40, 3), {}, {39}}}), absl::StatusCode::kOk);
  EXPECT_EQ(m_.kv->Length(1), 40);
}

TEST(ForwardTest, LogitsAreFiniteAndNotConstant) {
  testing::LoadedModel m = LoadTinyModel();
  ASSERT_TRUE(m.kv->AddSequence(1).ok());
  ForwardResult result;
  ASSERT_TRUE(m.model->Forward({SequenceStep{1, {1, 5, 9, 13}, {}, {3}}}, *m.kv, &result).ok());
  ASSERT_EQ(result.logits.size(), static_cast<size_t>(m.model->config().vocab_size));
  float lo = result.logits[0], hi = result.logits[0];
  for (float v : result.logits) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GT(hi - lo, 1e-3f);
}

}  // namespace
}  // namespace splitspec::engine
