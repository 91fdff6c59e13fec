// The CUDA graph cache: bucket selection (host only, runs everywhere CUDA is built), and
// capture + replay of enqueued kernels keyed by (batch bucket, tier) on a GPU.
#include "common/engine/cuda/add.cuh"
#include "common/engine/cuda/graph_cache.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace splitspec::engine::testing {
namespace {

TEST(BatchBucketTest, RoundsUpToPowersOfTwoUpTo64) {
  EXPECT_EQ(BatchBucket(1), 1);
  EXPECT_EQ(BatchBucket(3), 4);
  EXPECT_EQ(BatchBucket(8), 8);
  EXPECT_EQ(BatchBucket(33), 64);
  EXPECT_EQ(BatchBucket(65), 0);
}

using CudaGraphTest = CudaTest;

TEST_F(CudaGraphTest, ReplaysCapturedWorkPerKey) {
  const int n = 1000;
  Tensor acc = Make(*cuda_, std::vector<float>(n, 0.0f), 1, n);
  Tensor one = Make(*cuda_, std::vector<float>(n, 1.0f), 1, n);
  Tensor two = Make(*cuda_, std::vector<float>(n, 2.0f), 1, n);
  ASSERT_TRUE(cuda_->Synchronize().ok());
  CudaGraphCache graphs(cuda_->stream());
  cudaStream_t stream = static_cast<cudaStream_t>(cuda_->stream());
  auto add = [&](const Tensor& x) {
    return [&, x]() -> absl::Status {
      if (cuda::LaunchAdd(acc.f32(), x.f32(), n, stream) != cudaSuccess) return absl::InternalError("launch");
      return absl::OkStatus();
    };
  };
  ASSERT_TRUE(graphs.Capture({1, 1}, add(one)).ok());
  ASSERT_TRUE(graphs.Capture({1, 4}, add(two)).ok());
  EXPECT_EQ(Read(*cuda_, acc)[0], 0.0f) << "capturing must not run the work";
  ASSERT_TRUE(graphs.Launch({1, 1}).ok());
  ASSERT_TRUE(graphs.Launch({1, 4}).ok());
  ASSERT_TRUE(graphs.Launch({1, 4}).ok());
  EXPECT_EQ(graphs.Launch({8, 1}).code(), absl::StatusCode::kNotFound);
  const std::vector<float> result = Read(*cuda_, acc);
  EXPECT_EQ(result[0], 5.0f);
  EXPECT_EQ(result[n - 1], 5.0f);
  EXPECT_EQ(graphs.size(), 2);
}

}  // namespace
}  // namespace splitspec::engine::testing
