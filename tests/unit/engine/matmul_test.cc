// CPU kernels against straightforward double-precision references, and their invariance to
// how rows are batched and how many threads run.
#include <omp.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/engine/backend.h"
#include "common/engine/model/model_maker.h"

namespace splitspec::engine {
namespace {

struct Sizes {
  int n_out;
  int n_in;
  int n_tokens;
};

class MatMulTest : public ::testing::TestWithParam<std::tuple<DType, Sizes>> {};

TEST_P(MatMulTest, MatchesDoubleReferenceAndIsBatchInvariant) {
  const auto [dtype, sizes] = GetParam();
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w_values(static_cast<size_t>(sizes.n_out) * sizes.n_in);
  for (float& v : w_values) v = normal(rng);
  const std::vector<uint8_t> w_bytes = EncodeValues(w_values, dtype);
  // The reference uses the weights as stored (rounded to the dtype).
  std::vector<float> w_stored(w_values.size());
  for (size_t i = 0; i < w_values.size(); ++i) {
    uint16_t h;
    switch (dtype) {
      case DType::kF32: std::memcpy(&w_stored[i], &w_bytes[4 * i], 4); break;
      case DType::kF16: std::memcpy(&h, &w_bytes[2 * i], 2); w_stored[i] = F16ToF32(h); break;
      case DType::kBF16: std::memcpy(&h, &w_bytes[2 * i], 2); w_stored[i] = BF16ToF32(h); break;
      case DType::kQ8_0: break;  // quantized_test.cc covers it
    }
  }
  Tensor w = *backend->Allocate(dtype, sizes.n_out, sizes.n_in);
  backend->Upload(w_bytes.data(), w);
  Tensor bias = *backend->Allocate(DType::kF32, 1, sizes.n_out);
  for (int i = 0; i < sizes.n_out; ++i) bias.f32()[i] = normal(rng);
  Tensor x = *backend->Allocate(DType::kF32, sizes.n_tokens, sizes.n_in);
  for (int64_t i = 0; i < x.n_elements(); ++i) x.f32()[i] = normal(rng);
  Tensor out = *backend->Allocate(DType::kF32, sizes.n_tokens, sizes.n_out);
  backend->MatMul(x, w, &bias, out);

  for (int t = 0; t < sizes.n_tokens; ++t) {
    for (int o = 0; o < sizes.n_out; ++o) {
      double expected = bias.f32()[o];
      for (int k = 0; k < sizes.n_in; ++k) expected += static_cast<double>(w_stored[o * sizes.n_in + k]) * x.row(t)[k];
      ASSERT_NEAR(out.row(t)[o], expected, 1e-4 * (1.0 + std::sqrt(static_cast<double>(sizes.n_in))))
          << "token " << t << " row " << o;
    }
  }
  // Each token alone, with one thread, must give the same bits as the batched call.
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor single = *backend->Allocate(DType::kF32, 1, sizes.n_out);
  for (int t = 0; t < sizes.n_tokens; ++t) {
    const std::vector<int32_t> rows = {t};
    backend->MatMul(x, w, &bias, single, rows);
    ASSERT_EQ(std::memcmp(single.row(0), out.row(t), sizes.n_out * sizeof(float)), 0) << "token " << t;
  }
  omp_set_num_threads(saved_threads);
  for (Tensor* t : {&w, &bias, &x, &out, &single}) backend->Free(*t);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatMulTest,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                       ::testing::Values(Sizes{64, 64, 1}, Sizes{67, 80, 7}, Sizes{5, 33, 16}, Sizes{128, 192, 9},
                                         Sizes{3, 7, 2}, Sizes{37, 70, 11}, Sizes{10, 40, 5}, Sizes{9, 33, 3})));

// A fused projection (q, k, v as one weight matrix) must give each part exactly the bits of a
// separate MatMul over that part's rows, with part sizes that do not fill whole row blocks; the
// interface's default implementation (what a backend without an override runs) must agree too.
class MatMulSplitTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatMulSplitTest, EachPartEqualsItsOwnMatMulBitForBit) {
  const DType dtype = GetParam();
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  const std::vector<int64_t> part_rows = {13, 8, 3};
  const int64_t n_rows = 24, n_in = 70, n_tokens = 6;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w_values(static_cast<size_t>(n_rows * n_in));
  for (float& v : w_values) v = normal(rng);
  const std::vector<uint8_t> w_bytes = EncodeValues(w_values, dtype);
  Tensor w = *backend->Allocate(dtype, n_rows, n_in);
  backend->Upload(w_bytes.data(), w);
  Tensor bias = *backend->Allocate(DType::kF32, 1, n_rows);
  for (int64_t i = 0; i < n_rows; ++i) bias.f32()[i] = normal(rng);
  Tensor x = *backend->Allocate(DType::kF32, n_tokens, n_in);
  for (int64_t i = 0; i < x.n_elements(); ++i) x.f32()[i] = normal(rng);

  for (const bool with_bias : {false, true}) {
    std::vector<Tensor> fused, fallback, separate;
    int64_t first = 0;
    for (int64_t rows : part_rows) {
      fused.push_back(*backend->Allocate(DType::kF32, n_tokens, rows));
      fallback.push_back(*backend->Allocate(DType::kF32, n_tokens, rows));
      separate.push_back(*backend->Allocate(DType::kF32, n_tokens, rows));
      const size_t row_bytes = static_cast<size_t>(n_in) * DTypeSize(dtype);
      const Tensor part{static_cast<uint8_t*>(w.data) + first * row_bytes, dtype, rows, n_in};
      const Tensor part_bias{bias.f32() + first, DType::kF32, 1, rows};
      backend->MatMul(x, part, with_bias ? &part_bias : nullptr, separate.back());
      first += rows;
    }
    std::vector<Tensor*> fused_outs, fallback_outs;
    for (size_t i = 0; i < part_rows.size(); ++i) {
      fused_outs.push_back(&fused[i]);
      fallback_outs.push_back(&fallback[i]);
    }
    backend->MatMulSplit(x, w, with_bias ? &bias : nullptr, fused_outs);
    backend->Backend::MatMulSplit(x, w, with_bias ? &bias : nullptr, fallback_outs);
    for (size_t i = 0; i < part_rows.size(); ++i) {
      const size_t bytes = separate[i].n_bytes();
      EXPECT_EQ(std::memcmp(fused[i].data, separate[i].data, bytes), 0) << "part " << i << " bias " << with_bias;
      EXPECT_EQ(std::memcmp(fallback[i].data, separate[i].data, bytes), 0) << "part " << i << " bias " << with_bias;
    }
    for (auto* list : {&fused, &fallback, &separate})
      for (Tensor& t : *list) backend->Free(t);
  }
  for (Tensor* t : {&w, &bias, &x}) backend->Free(*t);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MatMulSplitTest, ::testing::Values(DType::kF32, DType::kF16, DType::kBF16));

TEST(CpuOpsTest, RmsNormAndSiluMulMatchReference) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  const int n = 37;
  Tensor x = *backend->Allocate(DType::kF32, 2, n);
  Tensor w = *backend->Allocate(DType::kF32, 1, n);
  Tensor out = *backend->Allocate(DType::kF32, 2, n);
  for (int i = 0; i < 2 * n; ++i) x.f32()[i] = std::sin(0.3f * i) * 2.0f;
  for (int i = 0; i < n; ++i) w.f32()[i] = 0.5f + 0.01f * i;
  backend->RmsNorm(x, w, 1e-5f, out);
  for (int t = 0; t < 2; ++t) {
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += static_cast<double>(x.row(t)[i]) * x.row(t)[i];
    const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(out.row(t)[i], x.row(t)[i] * inv * w.f32()[i], 1e-5);
  }
  Tensor gate_up = *backend->Allocate(DType::kF32, 2, 2 * n);
  Tensor act = *backend->Allocate(DType::kF32, 2, n);
  for (int i = 0; i < 4 * n; ++i) gate_up.f32()[i] = std::cos(0.7f * i) * 3.0f;
  backend->SiluMul(gate_up, act);
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < n; ++i) {
      const double g = gate_up.row(t)[i];
      EXPECT_NEAR(act.row(t)[i], g / (1 + std::exp(-g)) * gate_up.row(t)[n + i], 1e-5);
    }
  }
  for (Tensor* t : {&x, &w, &out, &gate_up, &act}) backend->Free(*t);
}

}  // namespace
}  // namespace splitspec::engine
