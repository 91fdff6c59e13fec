// SessionLeases with made-up times: use renews, idle sessions expire once, release forgets.
#include "common/spec/session_leases.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace splitspec::spec {
namespace {

std::vector<RequestId> Sorted(std::vector<RequestId> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(SessionLeasesTest, IdleSessionsExpireAndUseRenews) {
  SessionLeases leases(10.0);
  leases.Touch(1, 100.0);
  leases.Touch(2, 100.0);
  leases.Touch(3, 105.0);
  EXPECT_TRUE(leases.TakeExpired(110.0).empty());  // exactly the lease: still held
  leases.Touch(2, 109.0);                          // renewed by use
  EXPECT_EQ(Sorted(leases.TakeExpired(110.5)), std::vector<RequestId>({1}));
  EXPECT_TRUE(leases.TakeExpired(110.5).empty());  // handed out once
  EXPECT_EQ(Sorted(leases.TakeExpired(119.5)), std::vector<RequestId>({2, 3}));
  EXPECT_EQ(leases.size(), 0u);
}

TEST(SessionLeasesTest, ForgottenSessionsNeverExpire) {
  SessionLeases leases(1.0);
  leases.Touch(7, 0.0);
  leases.Forget(7);
  EXPECT_TRUE(leases.TakeExpired(100.0).empty());
}

TEST(SessionLeasesTest, NoLeaseMeansForever) {
  SessionLeases leases(0.0);
  leases.Touch(7, 0.0);
  EXPECT_TRUE(leases.TakeExpired(1e9).empty());
  EXPECT_EQ(leases.size(), 1u);
}

}  // namespace
}  // namespace splitspec::spec
