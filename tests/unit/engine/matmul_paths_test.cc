// The F32, F16 and BF16 matmul's AVX2 and portable paths, built into their own test binaries
// with those instruction sets (tests/unit/engine/CMakeLists.txt; engine_test covers the
// build's own path, AVX-512 on the machines the project is built on, where the others would
// otherwise never be compiled). On each path: every output near a double-precision reference,
// and the contract the speculative decoder rests on, that a token's outputs have the same bits
// whether it runs alone (decode), in any batch (a verification), with any number of threads,
// or as part of a fused projection.
// Self-contained (the kernels' sources and this file), so the binary holds one MatMul.
#include <omp.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/engine/cpu/kernels.h"
#include "common/engine/cpu/row_groups.h"
#include "common/engine/dtype.h"
#include "tests/unit/engine/instruction_set_path.h"

namespace splitspec::engine::cpu {
namespace {

// 64-byte aligned storage, as the CPU backend's buffers are.
struct Buffer {
  explicit Buffer(size_t bytes) : data(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64))) {}
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data;
};

// A weight matrix of normal(0, 1) values stored as dtype, held as the CPU backend's Upload holds
// it (row-major, or in groups of rows where this path reads those), and the values as stored.
struct Weights {
  Weights(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng)
      : storage(static_cast<size_t>(rows) * DTypeRowBytes(dtype, cols)),
        values(static_cast<size_t>(rows * cols)) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<uint8_t> row_major(static_cast<size_t>(rows) * DTypeRowBytes(dtype, cols));
    for (size_t i = 0; i < values.size(); ++i) {
      const float v = normal(rng);
      if (dtype == DType::kF32) {
        std::memcpy(&row_major[4 * i], &v, 4);
        values[i] = v;
      } else {
        const uint16_t h = dtype == DType::kF16 ? F32ToF16(v) : F32ToBF16(v);
        std::memcpy(&row_major[2 * i], &h, 2);
        values[i] = dtype == DType::kF16 ? F16ToF32(h) : BF16ToF32(h);
      }
    }
    tensor = Tensor{storage.data, dtype, rows, cols};
    if (HoldsInRowGroups(dtype, rows, cols)) {
      PackRowGroups(row_major.data(), dtype, rows, cols, storage.data);
      tensor.layout = TensorLayout::kCpuRowGroups;
    } else {
      std::memcpy(storage.data, row_major.data(), row_major.size());
    }
  }
  Buffer storage;
  std::vector<float> values;
  Tensor tensor;
};

// (rows, cols) of F32 activations.
struct Activations {
  Activations(int64_t rows, int64_t cols) : storage(static_cast<size_t>(rows * cols) * sizeof(float)) {
    tensor = Tensor{storage.data, DType::kF32, rows, cols};
  }
  Buffer storage;
  Tensor tensor;
};

// Runs f with `threads` OpenMP threads, restoring the count after.
template <typename Fn>
void WithThreads(int threads, Fn&& f) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  f();
  omp_set_num_threads(saved);
}

using Shape = std::tuple<DType, int64_t, int64_t, int64_t>;  // dtype, n_out, n_in, n_tokens

class MatMulPathTest : public ::testing::TestWithParam<Shape> {};

// Every output near the double-precision product; then the first b tokens as a batch, for
// batches of one token (decode) up to all of them, each with the bits of the whole batch's rows.
// The shapes cover the paths' token counts (one: decode streams; two to five: F32's pairs of
// tokens; more: tiles of rows and tokens, and past 128 tokens a second token tile), rows that
// leave a partial row block, and inputs that leave a partial vector.
TEST_P(MatMulPathTest, MatchesTheReferenceAndEveryBatchGivesTheSameBits) {
  if (!CpuRunsThisBuild()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  const auto [dtype, n_out, n_in, n_tokens] = GetParam();
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Weights w(dtype, n_out, n_in, rng);
  Activations bias(1, n_out), x(n_tokens, n_in), out(n_tokens, n_out), part(n_tokens, n_out);
  for (int64_t i = 0; i < n_out; ++i) bias.tensor.f32()[i] = normal(rng);
  for (int64_t i = 0; i < x.tensor.n_elements(); ++i) x.tensor.f32()[i] = normal(rng);
  WithThreads(2, [&] { MatMul(x.tensor, w.tensor, &bias.tensor, out.tensor, {}); });

  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t o = 0; o < n_out; ++o) {
      double expected = bias.tensor.f32()[o];
      for (int64_t k = 0; k < n_in; ++k) {
        expected += static_cast<double>(w.values[o * n_in + k]) * x.tensor.row(t)[k];
      }
      ASSERT_NEAR(out.tensor.row(t)[o], expected, 1e-4 * (1.0 + std::sqrt(static_cast<double>(n_in))))
          << "token " << t << " row " << o;
    }
  }
  for (int64_t batch = 1; batch <= n_tokens; batch = batch < 6 ? batch + 1 : batch * 2) {
    // The batch's tokens counted from the last, so that a token meets other neighbours.
    std::vector<int32_t> rows;
    for (int64_t i = 0; i < batch; ++i) rows.push_back(static_cast<int32_t>(n_tokens - 1 - i));
    Tensor view = part.tensor;
    view.rows = batch;
    WithThreads(2, [&] { MatMul(x.tensor, w.tensor, &bias.tensor, view, rows); });
    for (int64_t i = 0; i < batch; ++i) {
      ASSERT_EQ(std::memcmp(view.row(i), out.tensor.row(rows[i]), n_out * sizeof(float)), 0)
          << "token " << rows[i] << " in a batch of " << batch;
    }
  }
}

std::vector<Shape> PathShapes() {
  std::vector<Shape> shapes;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const auto& [n_out, n_in, n_tokens] :
         {std::tuple<int64_t, int64_t, int64_t>{64, 64, 1}, {67, 80, 7}, {5, 33, 16}, {3, 7, 2}, {37, 70, 11},
          {10, 40, 5}, {9, 24, 130}, {130, 96, 3}, {262, 256, 12}, {96, 4096, 4}}) {
      shapes.emplace_back(dtype, n_out, n_in, n_tokens);
    }
  }
  return shapes;
}

// Names such as F16_67x80_7_tokens.
std::string ShapeName(const ::testing::TestParamInfo<Shape>& info) {
  const auto [dtype, n_out, n_in, n_tokens] = info.param;
  return std::string(DTypeName(dtype)) + "_" + std::to_string(n_out) + "x" + std::to_string(n_in) + "_" +
         std::to_string(n_tokens) + "_tokens";
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatMulPathTest, ::testing::ValuesIn(PathShapes()), ShapeName);

// Whatever the number of threads sharing a projection (pairs claiming towards each other, an
// odd one out), every output has the one-thread bits. The matrix is big enough for a parallel
// region.
TEST(MatMulPathThreadsTest, AnyThreadCountGivesTheOneThreadBits) {
  if (!CpuRunsThisBuild()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const int64_t n_tokens : {1, 5, 12}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << ", " << n_tokens << " tokens");
      constexpr int64_t n_out = 262, n_in = 256;
      std::mt19937 rng(11);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      const Weights w(dtype, n_out, n_in, rng);
      Activations x(n_tokens, n_in), one(n_tokens, n_out), many(n_tokens, n_out);
      for (int64_t i = 0; i < x.tensor.n_elements(); ++i) x.tensor.f32()[i] = normal(rng);
      WithThreads(1, [&] { MatMul(x.tensor, w.tensor, nullptr, one.tensor, {}); });
      for (int threads = 2; threads <= 4; ++threads) {
        WithThreads(threads, [&] { MatMul(x.tensor, w.tensor, nullptr, many.tensor, {}); });
        EXPECT_EQ(std::memcmp(many.tensor.data, one.tensor.data, one.tensor.n_bytes()), 0)
            << "with " << threads << " threads";
      }
    }
  }
}

// A fused projection (q, k, v as one matrix) gives each part the bits of a MatMul over that
// part's rows alone, for parts that do not fill whole row blocks. The separate MatMuls read
// views of W's rows, so the check needs W row-major (on paths that hold this shape in groups of
// rows, row_groups_test.cc covers it).
TEST(MatMulPathSplitTest, EachPartEqualsItsOwnMatMulBitForBit) {
  if (!CpuRunsThisBuild()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  const std::vector<int64_t> part_rows = {100, 61, 101};
  constexpr int64_t n_rows = 262, n_in = 256;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    if (HoldsInRowGroups(dtype, n_rows, n_in)) continue;
    for (const int64_t n_tokens : {1, 6}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << ", " << n_tokens << " tokens");
      std::mt19937 rng(7);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      const Weights w(dtype, n_rows, n_in, rng);
      Activations bias(1, n_rows), x(n_tokens, n_in);
      for (int64_t i = 0; i < n_rows; ++i) bias.tensor.f32()[i] = normal(rng);
      for (int64_t i = 0; i < x.tensor.n_elements(); ++i) x.tensor.f32()[i] = normal(rng);
      std::vector<std::unique_ptr<Activations>> fused, separate;
      std::vector<Tensor*> fused_outs;
      int64_t first = 0;
      for (int64_t rows : part_rows) {
        fused.push_back(std::make_unique<Activations>(n_tokens, rows));
        separate.push_back(std::make_unique<Activations>(n_tokens, rows));
        fused_outs.push_back(&fused.back()->tensor);
        const size_t row_bytes = DTypeRowBytes(dtype, n_in);
        const Tensor part{w.storage.data + first * row_bytes, dtype, rows, n_in};
        const Tensor part_bias{bias.tensor.f32() + first, DType::kF32, 1, rows};
        WithThreads(2, [&] { MatMul(x.tensor, part, &part_bias, separate.back()->tensor, {}); });
        first += rows;
      }
      WithThreads(2, [&] { MatMulSplit(x.tensor, w.tensor, &bias.tensor, fused_outs); });
      for (size_t i = 0; i < part_rows.size(); ++i) {
        EXPECT_EQ(std::memcmp(fused[i]->tensor.data, separate[i]->tensor.data, separate[i]->tensor.n_bytes()), 0)
            << "part " << i;
      }
    }
  }
}

}  // namespace
}  // namespace splitspec::engine::cpu
