// CPU attention over query heads that share a KV head (grouped-query attention): the kernel
// computes a KV head's query heads side by side, a few at a time, and each head's output must
// still be the bits that head gets when it is the only query head of its KV head.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/engine/backend.h"
#include "common/engine/cpu/kernels.h"
#include "common/engine/dtype.h"

namespace splitspec::engine {
namespace {

struct Shape {
  int n_kv;
  int group;  // query heads a KV head
  int head_dim;
  int n_context;
  int n_new;
};

// The K and V rows of every position, and each query head's row of every position: query head
// h of KV head j at q[position][(j * group + h) * head_dim ...].
struct Inputs {
  std::vector<float> q, k, v;
};

Inputs RandomInputs(const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const size_t positions = static_cast<size_t>(s.n_context + s.n_new);
  Inputs in{std::vector<float>(positions * s.n_kv * s.group * s.head_dim),
            std::vector<float>(positions * s.n_kv * s.head_dim), std::vector<float>(positions * s.n_kv * s.head_dim)};
  for (std::vector<float>* values : {&in.q, &in.k, &in.v})
    for (float& x : *values) x = normal(rng);
  return in;
}

// Attention of the last n_new positions after a prefill of n_context, with only query head
// `only_head` of each KV head when it is set (then each KV head has one query head), through a
// cache of `dtype`. Returns the n_new positions' outputs.
std::vector<float> Attend(const Shape& s, const Inputs& in, DType dtype, int only_head) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  const int group = only_head >= 0 ? 1 : s.group;
  const int n_heads = s.n_kv * group;
  const KvLayout layout{16, s.n_kv, s.head_dim};
  const int64_t kv_width = int64_t{s.n_kv} * s.head_dim;
  const int64_t q_width = int64_t{n_heads} * s.head_dim;
  const int32_t n_blocks = (s.n_context + s.n_new) / layout.block_size + 1;
  absl::StatusOr<Tensor> k_cache = backend->Allocate(dtype, int64_t{n_blocks} * layout.block_size, kv_width);
  absl::StatusOr<Tensor> v_cache = backend->Allocate(dtype, int64_t{n_blocks} * layout.block_size, kv_width);
  EXPECT_TRUE(k_cache.ok() && v_cache.ok());
  std::vector<int32_t> block_table(static_cast<size_t>(n_blocks));
  for (int32_t b = 0; b < n_blocks; ++b) block_table[b] = n_blocks - 1 - b;
  std::vector<float> out;
  for (const auto& [first, fed] : {std::pair{0, s.n_context}, std::pair{s.n_context, s.n_new}}) {
    std::vector<float> q(static_cast<size_t>(fed * q_width));
    for (int p = 0; p < fed; ++p) {
      for (int j = 0; j < s.n_kv; ++j) {
        for (int h = 0; h < group; ++h) {
          const int source_head = j * s.group + (only_head >= 0 ? only_head : h);
          std::memcpy(&q[(p * n_heads + j * group + h) * s.head_dim],
                      &in.q[((first + p) * s.n_kv * s.group + source_head) * s.head_dim], s.head_dim * sizeof(float));
        }
      }
    }
    std::vector<float> k(in.k.begin() + first * kv_width, in.k.begin() + (first + fed) * kv_width);
    std::vector<float> v(in.v.begin() + first * kv_width, in.v.begin() + (first + fed) * kv_width);
    out.assign(static_cast<size_t>(fed * q_width), 0.0f);
    Tensor q_t{q.data(), DType::kF32, fed, q_width}, k_t{k.data(), DType::kF32, fed, kv_width};
    Tensor v_t{v.data(), DType::kF32, fed, kv_width}, out_t{out.data(), DType::kF32, fed, q_width};
    AttentionSequence seq;
    seq.block_table = block_table.data();
    seq.n_context = first;
    seq.n_new = fed;
    cpu::Attention(q_t, k_t, v_t, n_heads, layout, *k_cache, *v_cache, {&seq, 1}, out_t);
  }
  backend->Free(*k_cache);
  backend->Free(*v_cache);
  return out;
}

TEST(AttentionHeadsTest, EachQueryHeadGetsTheBitsItGetsAlone) {
  // Groups of 1 to 7 (several passes of heads side by side, and a partial last pass), heads of
  // whole vectors (64, 128: the widest chunk) and with a tail (24, 8), contexts below and above
  // sixteen positions, F32 and F16 caches.
  for (const DType dtype : {DType::kF32, DType::kF16}) {
    for (const int group : {1, 2, 3, 4, 5, 7}) {
      for (const int head_dim : {64, 128, 24, 8}) {
        for (const int n_context : {5, 40}) {
          const Shape s{2, group, head_dim, n_context, 3};
          const Inputs in = RandomInputs(s, 1000 * group + head_dim + n_context);
          const std::vector<float> together = Attend(s, in, dtype, -1);
          for (int h = 0; h < group; ++h) {
            const std::vector<float> alone = Attend(s, in, dtype, h);
            for (int p = 0; p < s.n_new; ++p) {
              for (int j = 0; j < s.n_kv; ++j) {
                const float* a = &alone[(p * s.n_kv + j) * head_dim];
                const float* t = &together[(p * s.n_kv * group + j * group + h) * head_dim];
                ASSERT_EQ(std::memcmp(a, t, head_dim * sizeof(float)), 0)
                    << "dtype " << static_cast<int>(dtype) << " group " << group << " head_dim " << head_dim
                    << " context " << n_context << " head " << h << " position " << p << " kv head " << j;
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace splitspec::engine
