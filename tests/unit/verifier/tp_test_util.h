// Helpers for the tensor-parallel verifier tests: a deadline that turns a hang into a failure,
// and a thread-safe recorder of every rank's step records.
#ifndef SPLITSPEC_TESTS_UNIT_VERIFIER_TP_TEST_UTIL_H_
#define SPLITSPEC_TESTS_UNIT_VERIFIER_TP_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <vector>

#include "verifier/tp_step.h"

namespace splitspec::verifier::testing {

// Runs `body` on a thread and waits for it at most `limit`. A rank stuck in a collective cannot
// be cancelled, so a body that overruns aborts the test binary with the test's name instead of
// hanging until the ctest timeout. (A bound, not a synchronisation: bodies finish in seconds.)
inline void RunWithDeadline(const std::function<void()>& body,
                            std::chrono::seconds limit = std::chrono::seconds(300)) {
  std::future<void> done = std::async(std::launch::async, body);
  if (done.wait_for(limit) != std::future_status::ready) {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::fprintf(stderr, "%s.%s: still running after %lld s: a rank is hung\n",
                 test->test_suite_name(), test->name(), static_cast<long long>(limit.count()));
    std::abort();
  }
  done.get();
}

// Collects StepRecords by rank; the observer may be called from every rank's thread at once.
class StepRecorder {
 public:
  StepObserver Observer() {
    return [this](const StepRecord& record) {
      std::lock_guard<std::mutex> lock(mu_);
      by_rank_[record.rank].push_back(record);
    };
  }
  std::vector<StepRecord> Rank(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    return by_rank_[rank];
  }

 private:
  std::mutex mu_;
  std::map<int, std::vector<StepRecord>> by_rank_;
};

// Every follower saw exactly rank 0's steps (kind, abort, KV bookkeeping), in order.
inline void ExpectLockstep(StepRecorder& recorder, int tp_size) {
  const std::vector<StepRecord> leader = recorder.Rank(0);
  ASSERT_FALSE(leader.empty());
  for (int rank = 1; rank < tp_size; ++rank) {
    const std::vector<StepRecord> follower = recorder.Rank(rank);
    ASSERT_EQ(follower.size(), leader.size()) << "rank " << rank;
    for (size_t i = 0; i < leader.size(); ++i) {
      EXPECT_EQ(follower[i].kind, leader[i].kind) << "rank " << rank << " step " << i;
      EXPECT_EQ(follower[i].aborted, leader[i].aborted) << "rank " << rank << " step " << i;
      EXPECT_TRUE(follower[i].kv == leader[i].kv)
          << "rank " << rank << " step " << i << ": KV bookkeeping differs";
    }
  }
}

}  // namespace splitspec::verifier::testing

#endif  // SPLITSPEC_TESTS_UNIT_VERIFIER_TP_TEST_UTIL_H_
