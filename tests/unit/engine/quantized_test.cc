// Int8 (Q8_0) weights: the quantizer's rounding, the CPU matmul on Q8_0 against an exact
// reference of its int8 arithmetic (activations quantized per block too, matmul_q8.cc) and
// against the F32 matmul on the dequantized weights, its batch invariance, and a whole model
// loaded with --quantize int8 against the F32 model make-model --int8-of writes.
#include <omp.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "common/engine/backend.h"
#include "common/engine/model/quantize.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/unit/engine/q8_arithmetic.h"
#include "tests/unit/engine/test_model.h"

namespace splitspec::engine {
namespace {

std::vector<float> Gaussian(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<float> Dequantized(const std::vector<uint8_t>& q8, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const size_t row_bytes = DTypeRowBytes(DType::kQ8_0, cols);
  for (int64_t r = 0; r < rows; ++r) DequantizeQ8Row(q8.data() + r * row_bytes, cols, out.data() + r * cols);
  return out;
}

TEST(QuantizeQ8Test, EachWeightIsWithinHalfAStepOfItsBlockScale) {
  const int64_t rows = 5, cols = 96;
  std::vector<float> w = Gaussian(rows * cols, 1);
  for (int i = 0; i < kQ8BlockSize; ++i) w[32 + i] = 0.0f;  // an all-zero block
  w[70] = 40.0f;                                            // an outlier widens only its block
  absl::StatusOr<std::vector<uint8_t>> q8 = QuantizeQ8(w, rows, cols);
  ASSERT_TRUE(q8.ok()) << q8.status();
  ASSERT_EQ(q8->size(), static_cast<size_t>(rows * (cols / 32) * 34));
  const std::vector<float> back = Dequantized(*q8, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(w[r * cols + b * 32 + i]));
      const float step = amax / 127.0f;
      for (int i = 0; i < 32; ++i) {
        const int64_t k = r * cols + b * 32 + i;
        // Half a step, plus the scale's own rounding to an IEEE half (relative 2^-11 of 127 steps).
        EXPECT_LE(std::fabs(back[k] - w[k]), 0.5f * step + amax * 0x1p-11f + 1e-7f) << "row " << r << " col " << k % cols;
      }
    }
  }
  for (int i = 0; i < 32; ++i) EXPECT_EQ(back[32 + i], 0.0f);
  EXPECT_NEAR(back[70], 40.0f, 40.0f * 0x1p-10f);
  // The outlier's block is coarser than its neighbours: its other weights carry more error.
  float err_outlier_block = 0, err_next_block = 0;
  for (int i = 64; i < 96; ++i) err_outlier_block = std::max(err_outlier_block, std::fabs(back[i] - w[i]));
  for (int i = 96; i < 128; ++i) err_next_block = std::max(err_next_block, std::fabs(back[i] - w[i]));
  EXPECT_GT(err_outlier_block, err_next_block);
}

TEST(QuantizeQ8Test, RejectsPartialBlocksAndNonFiniteWeights) {
  EXPECT_FALSE(QuantizeQ8(std::vector<float>(40, 1.0f), 1, 40).ok());
  std::vector<float> w(64, 1.0f);
  w[3] = std::nanf("");
  EXPECT_FALSE(QuantizeQ8(w, 2, 32).ok());
  w[3] = INFINITY;
  EXPECT_FALSE(QuantizeQ8(w, 2, 32).ok());
  EXPECT_FALSE(QuantizeQ8(std::vector<float>(64, 1.0f), 3, 32).ok());  // sizes disagree
}

float BlockAbsMax(const float* x, int64_t block) {
  float amax = 0;
  for (int i = 0; i < kQ8BlockSize; ++i) amax = std::max(amax, std::fabs(x[block * kQ8BlockSize + i]));
  return amax;
}

// What the kernel computes for one output, in double: the token's activations quantized per
// block of 32 (d = max|x| / 127, q = round-half-even(x / d)), exact integer block sums, scaled
// by both blocks' scales. `bound` receives the float rounding the kernel may add (a few ulps of
// the sum of the terms' magnitudes).
double Int8Reference(const std::vector<uint8_t>& q8, int64_t row, int64_t n_in, const float* x,
                     double* bound) {
  const uint8_t* w_row = q8.data() + row * DTypeRowBytes(DType::kQ8_0, n_in);
  double total = 0, magnitude = 0;
  for (int64_t b = 0; b < n_in / kQ8BlockSize; ++b) {
    const float amax = BlockAbsMax(x, b);
    const float x_scale = amax / 127.0f;
    const float inverse = amax == 0.0f ? 0.0f : 127.0f / amax;
    int64_t sum = 0;
    for (int i = 0; i < kQ8BlockSize; ++i) {
      const int64_t k = b * kQ8BlockSize + i;
      const auto q = static_cast<int64_t>(std::nearbyint(x[k] * inverse));
      sum += q * Q8RowValues(w_row, n_in)[k];
    }
    // The weight's scale is the one its block stores: dequantized weight / value, or 0.
    uint16_t half;
    std::memcpy(&half, Q8RowScales(w_row) + 2 * b, sizeof half);
    const double term = static_cast<double>(sum) * F16ToF32(half) * x_scale;
    total += term;
    magnitude += std::fabs(term);
  }
  *bound = 1e-5 * magnitude + 1e-6;
  return total;
}

// The Q8_0 product is the kernels' stated arithmetic bit for bit (q8_arithmetic.h), equals the exact int8
// arithmetic up to float rounding, stays within the
// activation rounding of the F32 product on the dequantized weights, and gives the same bits for
// every token alone and batched, with fused parts as with one matrix.
TEST(QuantizedMatMulTest, ComputesTheInt8ArithmeticOfEachTokenWhateverTheBatch) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  for (const auto& [n_out, n_in, n_tokens] : {std::tuple{67, 96, 7}, std::tuple{5, 32, 16}, std::tuple{128, 192, 9},
                                              std::tuple{3, 64, 1}, std::tuple{9, 1056, 4},
                                              std::tuple{48, 64, 11}, std::tuple{33, 96, 2}}) {
    SCOPED_TRACE(::testing::Message() << n_out << "x" << n_in << ", " << n_tokens << " tokens");
    const std::vector<float> w_values = Gaussian(static_cast<size_t>(n_out * n_in), n_in, 0.05f);
    const std::vector<uint8_t> q8 = *QuantizeQ8(w_values, n_out, n_in);
    const std::vector<float> deq = Dequantized(q8, n_out, n_in);
    Tensor wq = *backend->Allocate(DType::kQ8_0, n_out, n_in);
    backend->Upload(q8.data(), wq);
    Tensor wf = *backend->Allocate(DType::kF32, n_out, n_in);
    backend->Upload(deq.data(), wf);
    Tensor bias = *backend->Allocate(DType::kF32, 1, n_out);
    const std::vector<float> b = Gaussian(n_out, 3);
    backend->Upload(b.data(), bias);
    Tensor x = *backend->Allocate(DType::kF32, n_tokens, n_in);
    std::vector<float> xv = Gaussian(static_cast<size_t>(n_tokens * n_in), 4);
    for (int64_t k = 0; k < n_in; ++k) xv[k] = 0.0f;  // an all-zero token: scale 0
    backend->Upload(xv.data(), x);
    Tensor out_q = *backend->Allocate(DType::kF32, n_tokens, n_out);
    Tensor out_f = *backend->Allocate(DType::kF32, n_tokens, n_out);
    backend->MatMul(x, wq, &bias, out_q);
    backend->MatMul(x, wf, &bias, out_f);
    for (int t = 0; t < n_tokens; ++t) {
      const float* x_row = xv.data() + t * n_in;
      for (int r = 0; r < n_out; ++r) {
        double bound = 0;
        const double expected = Int8Reference(q8, r, n_in, x_row, &bound) + b[r];
        ASSERT_NEAR(out_q.row(t)[r], expected, bound) << "token " << t << " row " << r;
        const uint8_t* w_row = q8.data() + r * DTypeRowBytes(DType::kQ8_0, n_in);
        ASSERT_EQ(out_q.row(t)[r], Q8KernelArithmetic(w_row, n_in, x_row, b[r])) << "token " << t << " row " << r;
        // Rounding a token's value moves it by at most half its block's step, d / 2.
        double activation_bound = 1e-5;
        for (int64_t blk = 0; blk < n_in / kQ8BlockSize; ++blk) {
          const float amax = BlockAbsMax(x_row, blk);
          for (int i = 0; i < kQ8BlockSize; ++i) {
            activation_bound += std::fabs(deq[r * n_in + blk * kQ8BlockSize + i]) * amax / 127.0 / 2;
          }
        }
        ASSERT_NEAR(out_q.row(t)[r], out_f.row(t)[r], activation_bound) << "token " << t << " row " << r;
      }
    }

    const int saved_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    Tensor single = *backend->Allocate(DType::kF32, 1, n_out);
    for (int t = 0; t < n_tokens; ++t) {
      const std::vector<int32_t> rows = {t};
      backend->MatMul(x, wq, &bias, single, rows);
      EXPECT_EQ(std::memcmp(single.row(0), out_q.row(t), n_out * sizeof(float)), 0) << "token " << t;
    }
    omp_set_num_threads(saved_threads);

    // Fused parts against the whole: parts of 3 rows, up to 17 and the rest, so that groups of
    // 16 rows (q8_groups.h) straddle them.
    if (n_out > 4) {
      const int64_t middle = std::min<int64_t>(17, n_out - 4);
      const std::vector<int64_t> widths = {3, middle, n_out - 3 - middle};
      std::vector<Tensor> outs;
      for (int64_t width : widths) outs.push_back(*backend->Allocate(DType::kF32, n_tokens, width));
      std::vector<Tensor*> parts;
      for (Tensor& out : outs) parts.push_back(&out);
      backend->MatMulSplit(x, wq, &bias, parts);
      int64_t first = 0;
      for (size_t p = 0; p < outs.size(); ++p) {
        for (int t = 0; t < n_tokens; ++t) {
          EXPECT_EQ(std::memcmp(outs[p].row(t), out_q.row(t) + first, widths[p] * sizeof(float)), 0) << "part " << p;
        }
        first += widths[p];
        backend->Free(outs[p]);
      }
    }
    for (Tensor* t : {&wq, &wf, &bias, &x, &out_q, &out_f, &single}) backend->Free(*t);
  }
}

// A token whose activations hold a NaN or an inf (a diverged sequence) gets NaN outputs, as with
// F32 weights, and leaves the other tokens of the batch as they are alone.
TEST(QuantizedMatMulTest, NonFiniteTokensGiveNaNAndLeaveTheOthersAlone) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  const int64_t n_out = 8, n_in = 64;
  const std::vector<uint8_t> q8 = *QuantizeQ8(Gaussian(static_cast<size_t>(n_out * n_in), 5, 0.05f), n_out, n_in);
  Tensor wq = *backend->Allocate(DType::kQ8_0, n_out, n_in);
  backend->Upload(q8.data(), wq);
  std::vector<float> xv = Gaussian(static_cast<size_t>(3 * n_in), 6);
  xv[n_in + 40] = std::numeric_limits<float>::quiet_NaN();  // token 1
  xv[2 * n_in + 3] = -std::numeric_limits<float>::infinity();  // token 2
  Tensor x = *backend->Allocate(DType::kF32, 3, n_in);
  backend->Upload(xv.data(), x);
  Tensor both = *backend->Allocate(DType::kF32, 3, n_out);
  Tensor alone = *backend->Allocate(DType::kF32, 1, n_out);
  backend->MatMul(x, wq, nullptr, both);
  const std::vector<int32_t> first = {0};
  backend->MatMul(x, wq, nullptr, alone, first);
  EXPECT_EQ(std::memcmp(both.row(0), alone.row(0), n_out * sizeof(float)), 0);
  for (int r = 0; r < n_out; ++r) {
    EXPECT_TRUE(std::isnan(both.row(1)[r])) << r;
    EXPECT_TRUE(std::isnan(both.row(2)[r])) << r;
  }
  for (Tensor* t : {&wq, &x, &both, &alone}) backend->Free(*t);
}

TEST(QuantizedMatMulTest, EmbeddingRowsOfAQ8TableAreItsDequantizedRows) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  const int64_t vocab = 9, dim = 64;
  const std::vector<float> w = Gaussian(static_cast<size_t>(vocab * dim), 8);
  const std::vector<uint8_t> q8 = *QuantizeQ8(w, vocab, dim);
  const std::vector<float> deq = Dequantized(q8, vocab, dim);
  Tensor table = *backend->Allocate(DType::kQ8_0, vocab, dim);
  backend->Upload(q8.data(), table);
  Tensor out = *backend->Allocate(DType::kF32, 3, dim);
  const std::vector<int32_t> tokens = {8, 0, 5};
  backend->Embed(table, tokens, out);
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(std::memcmp(out.row(t), deq.data() + tokens[t] * dim, dim * sizeof(float)), 0) << "token " << t;
  }
  backend->Free(table);
  backend->Free(out);
}

TEST(QuantizedMatMulTest, Q8TensorsMustHoldWholeBlocks) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  EXPECT_FALSE(backend->Allocate(DType::kQ8_0, 4, 40).ok());
}

// A model loaded with int8 weights computes what its F32 round-trip copy computes, up to the
// rounding of its activations to int8, which moves logits about as much as rounding the weights
// did (a tiny random model; on the trained target both change perplexity by 0.01-0.02%).
TEST(QuantizedModelTest, Int8LoadStaysCloseToTheF32RoundTripModel) {
  for (const DType file_dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(file_dtype));
    testing::TestModelSpec spec;
    spec.dtype = file_dtype;
    spec.tie_embeddings = false;
    const std::string source = testing::TinyModelDir(spec);
    splitspec::testing::ScopedTempDir scratch("int8_round_trip_");
    const std::string round_trip = scratch.path() + "/model";
    ASSERT_TRUE(WriteInt8RoundTripModel(source, round_trip).ok());

    std::unique_ptr<Backend> backend = CreateCpuBackend();
    ModelLoadOptions int8;
    int8.quantize = WeightQuantization::kInt8;
    auto quantized = LlamaModel::Load(source, *backend, int8);
    ASSERT_TRUE(quantized.ok()) << quantized.status();
    auto reference = LlamaModel::Load(round_trip, *backend);
    ASSERT_TRUE(reference.ok()) << reference.status();
    auto plain = LlamaModel::Load(source, *backend);
    ASSERT_TRUE(plain.ok()) << plain.status();
    // Int8 weights are about a byte each (34 bytes per 32 weights), against 4 (F32) or 2 (BF16).
    EXPECT_LT((*quantized)->weight_bytes() * (file_dtype == DType::kF32 ? 3 : 1.6), (*plain)->weight_bytes());

    const std::vector<int32_t> tokens = testing::RandomTokens(23, (*plain)->config().vocab_size, 9);
    auto logits = [&](LlamaModel& model) {
      auto kv = model.CreateKvCache(64);
      EXPECT_TRUE(kv.ok());
      return testing::ChainLogits(model, **kv, 1, tokens);
    };
    const std::vector<float> q = logits(**quantized);
    const std::vector<float> r = logits(**reference);
    const std::vector<float> p = logits(**plain);
    ASSERT_EQ(q.size(), r.size());
    double activation_max = 0, activation_mean = 0, weight_mean = 0, scale = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      activation_max = std::max(activation_max, std::fabs(double{q[i]} - r[i]));
      activation_mean += std::fabs(double{q[i]} - r[i]) / static_cast<double>(q.size());
      weight_mean += std::fabs(double{r[i]} - p[i]) / static_cast<double>(q.size());
      scale = std::max(scale, std::fabs(double{p[i]}));
    }
    std::printf("int8 logits vs round trip: max %.3g, mean %.3g; round trip vs plain: mean %.3g; logit scale %.3g\n",
                activation_max, activation_mean, weight_mean, scale);
    EXPECT_GT(activation_max, 0.0);  // the activations were rounded: not the F32 path
    EXPECT_LT(activation_mean, 0.01 * scale);
    EXPECT_LT(activation_max, 0.08 * scale);
    EXPECT_LT(activation_mean, 2 * weight_mean);  // the same order as rounding the weights
  }
}

// What makes speculative greedy output equal plain greedy output on an int8 target: a token's
// logits are the same bits whether it is decoded alone or verified inside a longer chain, and
// whatever else shares the forward.
TEST(QuantizedModelTest, ChainVerificationEqualsTokenByTokenDecodeBitForBit) {
  testing::TestModelSpec spec;
  spec.tie_embeddings = false;
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  ModelLoadOptions int8;
  int8.quantize = WeightQuantization::kInt8;
  auto model = LlamaModel::Load(testing::TinyModelDir(spec), *backend, int8);
  ASSERT_TRUE(model.ok()) << model.status();
  auto kv = (*model)->CreateKvCache(64);
  ASSERT_TRUE(kv.ok());
  const int vocab = (*model)->config().vocab_size;
  const std::vector<int32_t> tokens = testing::RandomTokens(21, vocab, 4);
  const std::vector<float> chain = testing::ChainLogits(**model, **kv, 1, tokens);  // one forward

  // Sequence 2 decodes the same tokens one forward each, batched with sequence 3's 9-token chain.
  ASSERT_TRUE((*kv)->AddSequence(2).ok());
  ASSERT_TRUE((*kv)->AddSequence(3).ok());
  const std::vector<int32_t> other = testing::RandomTokens(9, vocab, 5);
  for (size_t i = 0; i < tokens.size(); ++i) {
    SequenceStep decode{2, {tokens[i]}, {}, {0}};
    std::vector<SequenceStep> steps = {decode};
    if (i == 0) steps.push_back(SequenceStep{3, other, {}, {0, 1, 2, 3, 4, 5, 6, 7, 8}});
    ForwardResult result;
    ASSERT_TRUE((*model)->Forward(steps, **kv, &result).ok());
    ASSERT_EQ(std::memcmp(result.Row(0), chain.data() + i * vocab, vocab * sizeof(float)), 0) << "token " << i;
  }
}

TEST(QuantizedModelTest, ParsesTheFlagValues) {
  EXPECT_EQ(*ParseWeightQuantization("int8"), WeightQuantization::kInt8);
  EXPECT_EQ(*ParseWeightQuantization("none"), WeightQuantization::kNone);
  EXPECT_FALSE(ParseWeightQuantization("int4").ok());
}

}  // namespace
}  // namespace splitspec::engine
