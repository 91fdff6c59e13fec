// Matrices held in groups of rows (cpu/row_groups.h), F16 and BF16 ones and F32 ones of long
// rows: every element where the layout says, and every product the bits of the same matrix held
// row by row.
#include <omp.h>

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/engine/backend.h"
#include "common/engine/cpu/row_groups.h"
#include "common/engine/model/model_maker.h"

namespace splitspec::engine {
namespace {

std::vector<uint8_t> RandomBytes(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (float& v : values) v = normal(rng);
  return EncodeValues(values, dtype);
}

float RowMajorElement(const std::vector<uint8_t>& bytes, DType dtype, int64_t index) {
  if (dtype == DType::kF32) {
    float f;
    std::memcpy(&f, &bytes[4 * index], 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, &bytes[2 * index], 2);
  return dtype == DType::kF16 ? F16ToF32(h) : BF16ToF32(h);
}

// Element k of a grouped row starting at `start`, as the kernels' format for `dtype` reads it.
float GroupedElement(const uint8_t* start, DType dtype, int64_t k) {
  switch (dtype) {
    case DType::kF32: return cpu::InRowGroups<cpu::F32Weights>::Scalar(start, k);
    case DType::kF16: return cpu::InRowGroups<cpu::F16Weights>::Scalar(start, k);
    default: return cpu::InRowGroups<cpu::BF16Weights>::Scalar(start, k);
  }
}

// The fewest columns a matrix of `dtype` is held in groups with (where it is at all).
int64_t GroupedCols(DType dtype) { return dtype == DType::kF32 ? cpu::kF32RowGroupMinCols : 64; }

class RowGroupsTest : public ::testing::TestWithParam<DType> {};

TEST_P(RowGroupsTest, EveryElementLiesWhereTheLayoutSays) {
  const DType dtype = GetParam();
  const int64_t rows = 48, cols = 3 * cpu::kLanes;
  const std::vector<uint8_t> row_major = RandomBytes(dtype, rows, cols, 1);
  std::vector<uint8_t> grouped(row_major.size());
  cpu::PackRowGroups(row_major.data(), dtype, rows, cols, grouped.data());
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* start =
        cpu::RowInGroups(grouped.data(), DTypeRowBytes(dtype, cols), cpu::RowGroupChunkBytes(dtype), r);
    cpu::RowGroupsRowToF32(grouped.data(), dtype, cols, r, row.data());
    for (int64_t k = 0; k < cols; ++k) {
      const float expected = RowMajorElement(row_major, dtype, r * cols + k);
      const float at = GroupedElement(start, dtype, k);
      ASSERT_EQ(at, expected) << "row " << r << " column " << k;
      ASSERT_EQ(row[k], expected) << "row " << r << " column " << k;
    }
  }
}

// Upload groups exactly the matrices HoldsInRowGroups names (all of them with AVX-512 when the
// shape fits, none without), and leaves their bytes' size alone.
TEST_P(RowGroupsTest, UploadGroupsTheShapesThatFit) {
  const DType dtype = GetParam();
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  const int64_t wide = GroupedCols(DType::kF32);
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{64, 64}, {48, 80}, {38, 64}, {64, 40}, {4, 16}, {24, 32},
                                   {8, wide}, {6, wide}, {8, wide - cpu::kLanes}}) {
    const std::vector<uint8_t> bytes = RandomBytes(dtype, rows, cols, 2);
    Tensor w = *backend->Allocate(dtype, rows, cols);
    backend->Upload(bytes.data(), w);
    EXPECT_EQ(w.layout == TensorLayout::kCpuRowGroups, cpu::HoldsInRowGroups(dtype, rows, cols)) << rows << " x " << cols;
    if (w.layout == TensorLayout::kRowMajor) {
      EXPECT_EQ(std::memcmp(w.data, bytes.data(), bytes.size()), 0);
    }
    backend->Free(w);
  }
#if defined(__AVX512F__)
  EXPECT_TRUE(cpu::HoldsInRowGroups(dtype, 64, GroupedCols(dtype)));
#endif
  EXPECT_FALSE(cpu::HoldsInRowGroups(DType::kF32, 64, 64));
  EXPECT_FALSE(cpu::HoldsInRowGroups(DType::kF32, 64, wide - cpu::kLanes));
  EXPECT_FALSE(cpu::HoldsInRowGroups(dtype, 38, GroupedCols(dtype)));
}

// The products of an uploaded (grouped where it fits) matrix against the same bytes held row by
// row, bit for bit: decode's one token, the row blocks' several, fused projections' parts, and
// one thread or two.
TEST_P(RowGroupsTest, ProductsHaveTheBitsOfTheRowMajorMatrix) {
  const DType dtype = GetParam();
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  const int saved_threads = omp_get_max_threads();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  struct Shape {
    std::vector<int64_t> part_rows;
    int64_t cols;
  };
  const int64_t wide = GroupedCols(DType::kF32);
  for (const Shape& shape : {Shape{{64}, 64}, Shape{{768, 256, 256}, 128}, Shape{{32, 16, 48}, 2048}, Shape{{24, 12}, 96},
                             Shape{{16, 8, 8}, wide}, Shape{{12}, wide + cpu::kLanes},
                             Shape{{6, 10}, wide}}) {
    int64_t rows = 0;
    for (int64_t part : shape.part_rows) rows += part;
    std::vector<uint8_t> row_major = RandomBytes(dtype, rows, shape.cols, 4);
    Tensor grouped = *backend->Allocate(dtype, rows, shape.cols);
    backend->Upload(row_major.data(), grouped);
    const Tensor by_rows{row_major.data(), dtype, rows, shape.cols};
    Tensor bias = *backend->Allocate(DType::kF32, 1, rows);
    for (int64_t i = 0; i < rows; ++i) bias.f32()[i] = normal(rng);
    for (const int threads : {1, 2}) {
      omp_set_num_threads(threads);
      for (const int64_t n_tokens : {1, 2, 5, 6, 7, 16, 20}) {
        SCOPED_TRACE(::testing::Message() << rows << " x " << shape.cols << ", " << n_tokens << " tokens, " << threads
                                          << " threads");
        Tensor x = *backend->Allocate(DType::kF32, n_tokens, shape.cols);
        for (int64_t i = 0; i < x.n_elements(); ++i) x.f32()[i] = normal(rng);
        std::vector<Tensor> got, want;
        std::vector<Tensor*> got_outs, want_outs;
        for (int64_t part : shape.part_rows) {
          got.push_back(*backend->Allocate(DType::kF32, n_tokens, part));
          want.push_back(*backend->Allocate(DType::kF32, n_tokens, part));
        }
        for (size_t i = 0; i < got.size(); ++i) {
          got_outs.push_back(&got[i]);
          want_outs.push_back(&want[i]);
        }
        backend->MatMulSplit(x, grouped, &bias, got_outs);
        backend->MatMulSplit(x, by_rows, &bias, want_outs);
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(std::memcmp(got[i].data, want[i].data, got[i].n_bytes()), 0) << "part " << i;
        }
        Tensor whole = *backend->Allocate(DType::kF32, n_tokens, rows);
        Tensor whole_by_rows = *backend->Allocate(DType::kF32, n_tokens, rows);
        backend->MatMul(x, grouped, nullptr, whole);
        backend->MatMul(x, by_rows, nullptr, whole_by_rows);
        EXPECT_EQ(std::memcmp(whole.data, whole_by_rows.data, whole.n_bytes()), 0);
        for (Tensor* t : {&x, &whole, &whole_by_rows}) backend->Free(*t);
        for (auto* list : {&got, &want})
          for (Tensor& t : *list) backend->Free(t);
      }
    }
    backend->Free(grouped);
    backend->Free(bias);
  }
  omp_set_num_threads(saved_threads);
}

// An embedding table held in groups looks up the rows the row-major table holds.
TEST_P(RowGroupsTest, EmbeddingRowsAreTheRowMajorRows) {
  const DType dtype = GetParam();
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  const int64_t vocab = 64, dim = GroupedCols(dtype) + 32;
  const std::vector<uint8_t> row_major = RandomBytes(dtype, vocab, dim, 5);
  Tensor table = *backend->Allocate(dtype, vocab, dim);
  backend->Upload(row_major.data(), table);
  const Tensor by_rows{const_cast<uint8_t*>(row_major.data()), dtype, vocab, dim};
  const std::vector<int32_t> tokens = {0, 17, 63, 5, 17};
  Tensor got = *backend->Allocate(DType::kF32, static_cast<int64_t>(tokens.size()), dim);
  Tensor want = *backend->Allocate(DType::kF32, static_cast<int64_t>(tokens.size()), dim);
  backend->Embed(table, tokens, got);
  backend->Embed(by_rows, tokens, want);
  EXPECT_EQ(std::memcmp(got.data, want.data, got.n_bytes()), 0);
  for (size_t t = 0; t < tokens.size(); ++t) {
    EXPECT_EQ(want.row(static_cast<int64_t>(t))[7], RowMajorElement(row_major, dtype, tokens[t] * dim + 7));
  }
  for (Tensor* t : {&table, &got, &want}) backend->Free(*t);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RowGroupsTest, ::testing::Values(DType::kF16, DType::kBF16, DType::kF32));

}  // namespace
}  // namespace splitspec::engine
