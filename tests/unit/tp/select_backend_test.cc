// Backend selection by name: runs in every build (with or without the CUDA backend).
#include "common/engine/cuda/select_backend.h"

#include <gtest/gtest.h>

namespace splitspec::engine {
namespace {

TEST(SelectBackendTest, CpuAlwaysWorks) {
  auto backend = CreateBackendByName("cpu");
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "cpu");
}

TEST(SelectBackendTest, RejectsUnknownNames) {
  EXPECT_EQ(CreateBackendByName("tpu").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateBackendByName("cuda:x").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SelectBackendTest, CudaIsUnimplementedOrBuiltOrUnavailable) {
  auto backend = CreateBackendByName("cuda:0");
  if (!CudaBackendCompiled()) {
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnimplemented);
  } else if (backend.ok()) {
    EXPECT_EQ((*backend)->name(), "cuda");
  } else {
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable) << backend.status();
  }
}

}  // namespace
}  // namespace splitspec::engine
