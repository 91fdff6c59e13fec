// A KV cache whose rows are F16 (KvCacheOptions::dtype): attention over it is attention over an
// F32 cache holding the same rows rounded to halves, to the bit; a model's logits stay close to
// those of an F32 cache; a dtype the backend cannot take is refused when the cache is made.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/engine/backend.h"
#include "common/engine/cpu/kernels.h"
#include "common/engine/dtype.h"
#include "common/engine/kv/kv_cache.h"
#include "tests/unit/engine/test_model.h"

namespace splitspec::engine {
namespace {

struct Rows {
  int64_t rows;
  int64_t cols;
  std::vector<float> values;
  Tensor AsTensor() { return Tensor{values.data(), DType::kF32, rows, cols}; }
};

Rows RandomRows(int64_t rows, int64_t cols, std::mt19937_64& rng, bool round_to_half) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  Rows r{rows, cols, std::vector<float>(static_cast<size_t>(rows * cols))};
  for (float& x : r.values) x = round_to_half ? F16ToF32(F32ToF16(normal(rng))) : normal(rng);
  return r;
}

// Prefills `n_context` tokens, then attends `n_new` more, against caches of `dtype`; returns the
// second call's output. Rows are drawn from `seed`, K and V rounded to halves when `round_kv`.
std::vector<float> AttentionOutput(DType dtype, bool round_kv, int n_heads, int n_kv, int head_dim, int n_context,
                                   int n_new, uint64_t seed) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  const KvLayout layout{16, n_kv, head_dim};
  const int64_t width = static_cast<int64_t>(n_kv) * head_dim;
  const int32_t n_blocks = (n_context + n_new) / layout.block_size + 1;
  absl::StatusOr<Tensor> k_cache = backend->Allocate(dtype, int64_t{n_blocks} * layout.block_size, width);
  absl::StatusOr<Tensor> v_cache = backend->Allocate(dtype, int64_t{n_blocks} * layout.block_size, width);
  EXPECT_TRUE(k_cache.ok() && v_cache.ok());
  std::vector<int32_t> block_table(static_cast<size_t>(n_blocks));
  for (int32_t b = 0; b < n_blocks; ++b) block_table[b] = n_blocks - 1 - b;  // not in order
  std::mt19937_64 rng(seed);
  std::vector<float> result;
  for (const auto& [context, fed] : {std::pair{0, n_context}, std::pair{n_context, n_new}}) {
    Rows q = RandomRows(fed, int64_t{n_heads} * head_dim, rng, false);
    Rows k = RandomRows(fed, width, rng, round_kv);
    Rows v = RandomRows(fed, width, rng, round_kv);
    Rows out{fed, int64_t{n_heads} * head_dim, std::vector<float>(static_cast<size_t>(fed) * n_heads * head_dim)};
    AttentionSequence seq;
    seq.block_table = block_table.data();
    seq.n_context = context;
    seq.n_new = fed;
    Tensor q_t = q.AsTensor(), k_t = k.AsTensor(), v_t = v.AsTensor(), out_t = out.AsTensor();
    cpu::Attention(q_t, k_t, v_t, n_heads, layout, *k_cache, *v_cache, {&seq, 1}, out_t);
    result = out.values;
  }
  backend->Free(*k_cache);
  backend->Free(*v_cache);
  return result;
}

TEST(KvDTypeTest, AnF16CacheAttendsAsAnF32CacheOfTheRoundedRows) {
  // Head sizes of whole vectors and with a tail; contexts below and above sixteen positions
  // (the AVX-512 path scores sixteen at a time).
  for (const int head_dim : {64, 24}) {
    for (const int n_context : {5, 40}) {
      const std::vector<float> f16 = AttentionOutput(DType::kF16, false, 8, 2, head_dim, n_context, 3, 11);
      const std::vector<float> rounded = AttentionOutput(DType::kF32, true, 8, 2, head_dim, n_context, 3, 11);
      const std::vector<float> unrounded = AttentionOutput(DType::kF32, false, 8, 2, head_dim, n_context, 3, 11);
      ASSERT_EQ(f16.size(), rounded.size());
      EXPECT_EQ(std::memcmp(f16.data(), rounded.data(), f16.size() * sizeof(float)), 0)
          << "head_dim " << head_dim << " context " << n_context;
      // The rounding is there: the F32 cache of the unrounded rows gives other bits.
      EXPECT_NE(std::memcmp(f16.data(), unrounded.data(), f16.size() * sizeof(float)), 0);
    }
  }
}

TEST(KvDTypeTest, ModelLogitsStayCloseToThoseOfAnF32Cache) {
  testing::TestModelSpec f32_spec;
  testing::TestModelSpec f16_spec;
  f16_spec.kv_dtype = DType::kF16;
  testing::LoadedModel f32 = testing::LoadTinyModel(f32_spec);
  testing::LoadedModel f16 = testing::LoadTinyModel(f16_spec);
  ASSERT_EQ(f16.kv->k(0).dtype, DType::kF16);
  const std::vector<int32_t> tokens = testing::RandomTokens(60, f32.model->config().vocab_size, 3);
  const std::vector<float> a = testing::ChainLogits(*f32.model, *f32.kv, 1, tokens);
  const std::vector<float> b = testing::ChainLogits(*f16.model, *f16.kv, 1, tokens);
  ASSERT_EQ(a.size(), b.size());
  double largest = 0, max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, std::fabs(static_cast<double>(a[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  EXPECT_GT(max_diff, 0.0);  // the F16 rows were used
  EXPECT_LT(max_diff, 1e-2 * largest) << "largest logit " << largest;
}

TEST(KvDTypeTest, ACacheOfADTypeTheBackendCannotTakeIsRefused) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  EXPECT_TRUE(backend->SupportsKvDType(DType::kF32));
  EXPECT_TRUE(backend->SupportsKvDType(DType::kF16));
  KvCacheOptions options{2, 2, 16, 4, 16, DType::kBF16};
  absl::StatusOr<std::unique_ptr<KvCache>> cache = KvCache::Create(*backend, options);
  ASSERT_FALSE(cache.ok());
  EXPECT_EQ(cache.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cache.status().message().find("BF16"), std::string::npos) << cache.status();
  options.dtype = DType::kF16;
  EXPECT_TRUE(KvCache::Create(*backend, options).ok());
}

TEST(KvDTypeTest, FlagValues) {
  EXPECT_EQ(*ParseKvDType("f32"), DType::kF32);
  EXPECT_EQ(*ParseKvDType("f16"), DType::kF16);
  EXPECT_EQ(ParseKvDType("bf16").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseKvDType("F16").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace splitspec::engine
