// The int8 matmul's AVX2 and portable paths, built into their own test binaries with those
// instruction sets (tests/unit/engine/CMakeLists.txt; engine_test covers the build's own path):
// each computes exactly the arithmetic matmul_q8.cc states (q8_arithmetic.h), so every path
// gives the same bits.
// Self-contained (the kernel's two sources and this file), so the binary holds one MatMulQ8.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "common/engine/cpu/matmul_parts.h"
#include "common/engine/cpu/q8_groups.h"
#include "common/engine/dtype.h"
#include "tests/unit/engine/instruction_set_path.h"
#include "tests/unit/engine/q8_arithmetic.h"

namespace splitspec::engine::cpu {
namespace {

// A Q8_0 matrix in the file's row layout with random scales and values in [-127, 127].
std::vector<uint8_t> RandomQ8(int64_t rows, int64_t cols, std::mt19937& rng) {
  const size_t row_bytes = DTypeRowBytes(DType::kQ8_0, cols);
  std::vector<uint8_t> q8(static_cast<size_t>(rows) * row_bytes);
  std::uniform_int_distribution<int> value(-127, 127);
  std::uniform_real_distribution<float> scale(1e-4f, 0.1f);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = q8.data() + r * row_bytes;
    auto* values = const_cast<int8_t*>(Q8RowValues(row, cols));
    for (int64_t b = 0; b < cols / kQ8BlockSize; ++b) {
      const uint16_t half = F32ToF16(scale(rng));
      std::memcpy(row + 2 * b, &half, sizeof half);
    }
    for (int64_t k = 0; k < cols; ++k) values[k] = static_cast<int8_t>(value(rng));
  }
  return q8;
}

// MatMulQ8 of `n_tokens` rows of x (n_in each) against the Q8_0 matrix q8 (file layout),
// through the grouped layout the kernel reads.
std::vector<float> GroupedProduct(const std::vector<uint8_t>& q8, int64_t n_out, int64_t n_in,
                                  const std::vector<float>& x, int64_t n_tokens, const float* bias) {
  std::vector<uint8_t> grouped(Q8GroupedBytes(n_out, n_in));
  PackQ8Groups(q8.data(), n_out, n_in, grouped.data());
  std::vector<const float*> rows;
  for (int64_t t = 0; t < n_tokens; ++t) rows.push_back(x.data() + t * n_in);
  std::vector<float> out(static_cast<size_t>(n_tokens * n_out));
  const OutputPart whole{out.data(), 0, n_out};
  MatMulQ8(grouped.data(), n_out, n_in, {&whole, 1}, rows, bias);
  return out;
}

TEST(Q8PathTest, ComputesTheStatedArithmeticBitForBit) {
  if (!CpuRunsThisBuild()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto& [n_out, n_in, n_tokens] : {std::tuple{67, 96, 7}, std::tuple{48, 64, 11}, std::tuple{33, 1056, 2},
                                              std::tuple{5, 32, 1}, std::tuple{16, 128, 9},
                                              std::tuple{67, 96, 1}, std::tuple{256, 64, 1}}) {
    SCOPED_TRACE(::testing::Message() << n_out << "x" << n_in << ", " << n_tokens << " tokens");
    const std::vector<uint8_t> q8 = RandomQ8(n_out, n_in, rng);
    std::vector<float> x(static_cast<size_t>(n_tokens * n_in)), bias(static_cast<size_t>(n_out));
    for (float& v : x) v = normal(rng);
    for (float& v : bias) v = normal(rng);
    std::fill(x.begin(), x.begin() + kQ8BlockSize, 0.0f);  // an all-zero block: scale 0
    const std::vector<float> out = GroupedProduct(q8, n_out, n_in, x, n_tokens, bias.data());
    const size_t row_bytes = DTypeRowBytes(DType::kQ8_0, n_in);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < n_out; ++r) {
        ASSERT_EQ(out[t * n_out + r], Q8KernelArithmetic(q8.data() + r * row_bytes, n_in, x.data() + t * n_in, bias[r]))
            << "token " << t << " row " << r;
      }
    }
    // And each weight reads back from the groups as value x scale.
    std::vector<uint8_t> grouped(Q8GroupedBytes(n_out, n_in));
    PackQ8Groups(q8.data(), n_out, n_in, grouped.data());
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t r = 0; r < n_out; ++r) {
      const uint8_t* w_row = q8.data() + r * row_bytes;
      Q8GroupedRow(grouped.data(), n_in, r, row.data());
      for (int64_t k = 0; k < n_in; ++k) {
        uint16_t half;
        std::memcpy(&half, w_row + 2 * (k / kQ8BlockSize), sizeof half);
        ASSERT_EQ(row[k], Q8RowValues(w_row, n_in)[k] * F16ToF32(half)) << "row " << r << " weight " << k;
      }
    }
  }
}

// A token with an inf or a NaN among its activations gets NaN outputs; the others keep theirs.
TEST(Q8PathTest, NonFiniteTokensGiveNaNAndLeaveTheOthersAlone) {
  if (!CpuRunsThisBuild()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int64_t n_out = 20, n_in = 96, n_tokens = 3;
  const std::vector<uint8_t> q8 = RandomQ8(n_out, n_in, rng);
  std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
  for (float& v : x) v = normal(rng);
  x[n_in + 40] = std::numeric_limits<float>::infinity();       // token 1, second block
  x[2 * n_in + 95] = std::numeric_limits<float>::quiet_NaN();  // token 2, last lane
  const std::vector<float> out = GroupedProduct(q8, n_out, n_in, x, n_tokens, nullptr);
  const size_t row_bytes = DTypeRowBytes(DType::kQ8_0, n_in);
  for (int64_t r = 0; r < n_out; ++r) {
    EXPECT_EQ(out[r], Q8KernelArithmetic(q8.data() + r * row_bytes, n_in, x.data(), 0.0f)) << r;
    EXPECT_TRUE(std::isnan(out[n_out + r])) << r;
    EXPECT_TRUE(std::isnan(out[2 * n_out + r])) << r;
  }
}

}  // namespace
}  // namespace splitspec::engine::cpu
