// Backend selection by name: runs in every build (with or without the CUDA backend). Device
// names parse strictly, unusable devices are refused with a reason before anything is created,
// and binding a thread sets that thread's OpenMP team size only.
#include "common/engine/cuda/select_backend.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <string>
#include <thread>

namespace splitspec::engine {
namespace {

TEST(SelectBackendTest, CpuAlwaysWorks) {
  auto backend = CreateBackendByName("cpu");
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "cpu");
  EXPECT_TRUE(CheckDevice("cpu").ok());
  EXPECT_TRUE(BackendStatus(**backend).ok());
  EXPECT_EQ(BackendStream(**backend), nullptr);
}

TEST(SelectBackendTest, RejectsUnknownNames) {
  EXPECT_EQ(CreateBackendByName("tpu").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateBackendByName("cuda:x").status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* name : {"", "CPU", "cuda:", "cuda:-1", "cuda:1x", "cuda0", "gpu"}) {
    EXPECT_EQ(ParseDevice(name).status().code(), absl::StatusCode::kInvalidArgument)
        << "'" << name << "'";
    EXPECT_EQ(CheckDevice(name).code(), absl::StatusCode::kInvalidArgument) << "'" << name << "'";
  }
}

TEST(SelectBackendTest, ParsesCudaOrdinals) {
  auto cuda = ParseDevice("cuda");
  ASSERT_TRUE(cuda.ok());
  EXPECT_TRUE(cuda->cuda);
  EXPECT_EQ(cuda->index, 0);
  EXPECT_EQ(cuda->ToString(), "cuda:0");
  auto third = ParseDevice("cuda:3");
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->index, 3);
  auto cpu = ParseDevice("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_FALSE(cpu->cuda);
  EXPECT_EQ(cpu->ToString(), "cpu");
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

// No machine has 1000 GPUs: the check refuses it in every build, naming the way out.
TEST(SelectBackendTest, CheckDeviceRefusesAMissingGpuWithAReason) {
  const absl::Status status = CheckDevice("cuda:999");
  EXPECT_EQ(status.code(), CudaBackendCompiled() ? absl::StatusCode::kUnavailable
                                                 : absl::StatusCode::kUnimplemented)
      << status;
  EXPECT_NE(status.message().find("cuda:999"), std::string::npos) << status;
  EXPECT_NE(status.message().find("--device cpu"), std::string::npos) << status;
  EXPECT_EQ(CreateBackendByName("cuda:999").status().code(), status.code());
}

TEST(SelectBackendTest, BindingSetsTheCallingThreadsOpenMpTeamOnly) {
  std::thread([] {
    ASSERT_TRUE(BindCallingThread(DeviceSpec{}, 3).ok());
    EXPECT_EQ(omp_get_max_threads(), 3);
    ASSERT_TRUE(BindCallingThread(DeviceSpec{}, 0).ok());  // 0 leaves it alone
    EXPECT_EQ(omp_get_max_threads(), 3);
  }).join();
  const int before = omp_get_max_threads();
  std::thread([] { ASSERT_TRUE(BindCallingThread(DeviceSpec{}, 2).ok()); }).join();
  EXPECT_EQ(omp_get_max_threads(), before) << "another thread's binding changed this thread's team";
}

}  // namespace
}  // namespace splitspec::engine
