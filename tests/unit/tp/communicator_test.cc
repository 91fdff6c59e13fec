// The in-process communicator: sums in rank order on every rank, broadcasts, rejects
// mismatched calls on all ranks alike, and can be reused for many collectives in a row.
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "common/engine/comm/in_process_communicator.h"

namespace splitspec::engine {
namespace {

// Runs body(rank) on one thread per rank and joins them.
void RunRanks(int n_ranks, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n_ranks; ++r) threads.emplace_back(body, r);
  for (std::thread& t : threads) t.join();
}

// Values whose float sum depends on the order of addition.
float ValueOf(int rank, int64_t i) { return (rank % 2 == 0 ? 1e8f : 1.0f) * (1.0f + 0.37f * static_cast<float>((i * 7 + rank) % 11)) * (rank == 1 ? -1.0f : 1.0f); }

TEST(InProcessCommunicatorTest, RejectsEmptyGroup) {
  EXPECT_EQ(CreateInProcessGroup(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(InProcessCommunicatorTest, AllReduceSumsInRankOrderOnEveryRank) {
  for (int n_ranks : {1, 2, 3, 4}) {
    auto group = CreateInProcessGroup(n_ranks);
    ASSERT_TRUE(group.ok());
    constexpr int64_t kN = 1001;  // not a multiple of the rank count: uneven slices
    std::vector<std::vector<float>> data(n_ranks, std::vector<float>(kN));
    for (int r = 0; r < n_ranks; ++r) {
      for (int64_t i = 0; i < kN; ++i) data[r][i] = ValueOf(r, i);
    }
    std::vector<absl::Status> status(n_ranks);
    RunRanks(n_ranks, [&](int r) {
      EXPECT_EQ((*group)[r]->rank(), r);
      EXPECT_EQ((*group)[r]->size(), n_ranks);
      status[r] = (*group)[r]->AllReduceSum(data[r].data(), kN);
    });
    for (int r = 0; r < n_ranks; ++r) {
      ASSERT_TRUE(status[r].ok()) << status[r];
      for (int64_t i = 0; i < kN; ++i) {
        float expected = ValueOf(0, i);
        for (int q = 1; q < n_ranks; ++q) expected += ValueOf(q, i);
        ASSERT_EQ(data[r][i], expected) << "ranks " << n_ranks << " rank " << r << " element " << i;
      }
    }
  }
}

TEST(InProcessCommunicatorTest, BroadcastCopiesTheRootsBytes) {
  constexpr int kRanks = 3;
  auto group = CreateInProcessGroup(kRanks);
  ASSERT_TRUE(group.ok());
  std::vector<std::vector<int32_t>> data(kRanks, std::vector<int32_t>(17));
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < 17; ++i) data[r][i] = r * 100 + i;
  }
  RunRanks(kRanks, [&](int r) {
    EXPECT_TRUE((*group)[r]->Broadcast(data[r].data(), data[r].size() * sizeof(int32_t), 1).ok());
  });
  for (int r = 0; r < kRanks; ++r) {
    for (int i = 0; i < 17; ++i) EXPECT_EQ(data[r][i], 100 + i);
  }
  EXPECT_EQ((*group)[0]->Broadcast(data[0].data(), 4, 3).code(), absl::StatusCode::kInvalidArgument);
}

TEST(InProcessCommunicatorTest, MismatchedSizesFailOnEveryRankWithoutHanging) {
  constexpr int kRanks = 2;
  auto group = CreateInProcessGroup(kRanks);
  ASSERT_TRUE(group.ok());
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(8, 1.0f));
  std::vector<absl::Status> status(kRanks);
  RunRanks(kRanks, [&](int r) { status[r] = (*group)[r]->AllReduceSum(data[r].data(), r == 0 ? 8 : 4); });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(status[r].code(), absl::StatusCode::kInvalidArgument) << r;
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(data[r][0], 1.0f) << "a failed all-reduce must not write";
  // The group stays usable after a failed collective.
  RunRanks(kRanks, [&](int r) { status[r] = (*group)[r]->AllReduceSum(data[r].data(), 8); });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(status[r].ok());
    EXPECT_EQ(data[r][7], 2.0f);
  }
}

TEST(InProcessCommunicatorTest, ManyCollectivesInARowStayInStep) {
  constexpr int kRanks = 4;
  constexpr int kRounds = 200;
  auto group = CreateInProcessGroup(kRanks);
  ASSERT_TRUE(group.ok());
  std::vector<float> final_value(kRanks);
  RunRanks(kRanks, [&](int r) {
    std::vector<float> x(5, 0.0f);
    for (int round = 0; round < kRounds; ++round) {
      // Each round adds 1 per rank to what the previous round agreed on.
      for (float& v : x) v = v / kRanks + 1.0f;
      EXPECT_TRUE((*group)[r]->AllReduceSum(x.data(), static_cast<int64_t>(x.size())).ok());
    }
    final_value[r] = x[4];
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(final_value[r], final_value[0]);
  // Each round maps the agreed value s to ranks * (s / ranks + 1) = s + ranks (exact in float).
  EXPECT_EQ(final_value[0], static_cast<float>(kRanks * kRounds));
}

}  // namespace
}  // namespace splitspec::engine
