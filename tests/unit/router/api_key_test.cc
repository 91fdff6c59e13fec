// The bearer key check both public APIs share.
#include "router/api_key.h"

#include "gtest/gtest.h"

namespace splitspec::router {
namespace {

TEST(ApiKeyTest, OnlyTheExactKeyAfterTheBearerSchemeIsAccepted) {
  EXPECT_TRUE(ApiKeyAccepts("s3cret", "Bearer s3cret"));
  EXPECT_TRUE(ApiKeyAccepts("s3cret", "bearer s3cret"));  // the scheme is case-insensitive
  EXPECT_FALSE(ApiKeyAccepts("s3cret", ""));
  EXPECT_FALSE(ApiKeyAccepts("s3cret", "s3cret"));
  EXPECT_FALSE(ApiKeyAccepts("s3cret", "Basic s3cret"));
  EXPECT_FALSE(ApiKeyAccepts("s3cret", "Bearer S3cret"));  // the key is not
  EXPECT_FALSE(ApiKeyAccepts("s3cret", "Bearer s3cre"));
  EXPECT_FALSE(ApiKeyAccepts("s3cret", "Bearer s3crett"));
  EXPECT_FALSE(ApiKeyAccepts("s3cret", "Bearer  s3cret"));
  EXPECT_FALSE(ApiKeyAccepts("s3cret", "Bearer "));
}

TEST(ApiKeyTest, NoKeyMeansOpen) {
  EXPECT_TRUE(ApiKeyAccepts("", ""));
  EXPECT_TRUE(ApiKeyAccepts("", "Bearer anything"));
}

}  // namespace
}  // namespace splitspec::router
