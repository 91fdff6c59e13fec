// Helpers for the CUDA conformance tests: a fixture that skips without a GPU, and moving host
// data in and out of either backend.
#ifndef SPLITSPEC_TESTS_UNIT_CUDA_CUDA_TEST_UTIL_H_
#define SPLITSPEC_TESTS_UNIT_CUDA_CUDA_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/engine/backend.h"
#include "common/engine/cuda/cuda_backend.h"

namespace splitspec::engine::testing {

// Skips every test of a derived fixture when no CUDA device is present. Over the CPU emulation
// (cuda_emulated_test) the emulated device is always present, so nothing skips.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device: the CUDA backend is compiled but not run here";
    auto cuda = CreateCudaBackend();
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    cuda_ = std::move(*cuda);
    cpu_ = CreateCpuBackend();
  }
  void TearDown() override {
    if (cuda_ != nullptr) {
      EXPECT_TRUE(cuda_->Synchronize().ok()) << cuda_->status();
    }
  }

  // A tensor on `backend` holding `host` (f32 values stored as `dtype`). Tests never free
  // these: they are small and the process ends with the test binary.
  static Tensor Make(Backend& backend, const std::vector<float>& host, int64_t rows, int64_t cols,
                     DType dtype = DType::kF32) {
    absl::StatusOr<Tensor> t = backend.Allocate(dtype, rows, cols);
    EXPECT_TRUE(t.ok()) << t.status();
    std::vector<uint8_t> bytes(t->n_bytes());
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float v = host[i];
      if (dtype == DType::kF32) {
        std::memcpy(bytes.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = dtype == DType::kF16 ? F32ToF16(v) : F32ToBF16(v);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    }
    backend.Upload(bytes.data(), *t);
    return *t;
  }
  static std::vector<float> Read(Backend& backend, const Tensor& t) {
    std::vector<float> host(static_cast<size_t>(t.n_elements()));
    backend.DownloadRows(t, 0, t.rows, host.data());
    return host;
  }

  std::unique_ptr<CudaBackend> cuda_;
  std::unique_ptr<Backend> cpu_;
};

inline std::vector<float> RandomValues(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// max |a - b| <= tolerance * max(1, max |a|), with the worst element in the message. A NaN
// where the other side has a number is the worst difference there is (and stays the worst).
inline void ExpectNear(const std::vector<float>& expected, const std::vector<float>& actual, float tolerance,
                       const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  float scale = 1.0f;
  for (float v : expected) scale = std::max(scale, std::fabs(v));
  size_t worst = 0;
  float worst_diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(expected[i]) && std::isnan(actual[i])) continue;
    float diff = std::fabs(expected[i] - actual[i]);
    if (std::isnan(diff)) diff = INFINITY;
    if (diff > worst_diff) {
      worst_diff = diff;
      worst = i;
    }
  }
  EXPECT_LE(worst_diff, tolerance * scale) << what << ": element " << worst << " expected " << expected[worst]
                                           << " got " << actual[worst];
}

}  // namespace splitspec::engine::testing

#endif  // SPLITSPEC_TESTS_UNIT_CUDA_CUDA_TEST_UTIL_H_
