// The CPU attention's AVX2 and portable paths, built into their own test binaries with those
// instruction sets (tests/unit/engine/CMakeLists.txt; engine_test covers the build's own path).
// On each path, with F32 and F16 caches: outputs near a double-precision reference, and the
// bits the speculative decoder rests on: a tree node's output is its root-to-node path's run as
// a chain (also with tree nodes cached by an earlier call), a sequence's outputs do not depend
// on the other sequences of the call or on the thread count, and a query head's outputs do not
// depend on the other query heads of its KV head.
// Self-contained (the kernel's source and this file), so the binary holds one Attention.
#include <omp.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/engine/cpu/kernels.h"
#include "common/engine/dtype.h"
#include "tests/unit/engine/instruction_set_path.h"

namespace splitspec::engine::cpu {
namespace {

struct Heads {
  int n_kv;
  int group;  // query heads a KV head
  int head_dim;
  int n_heads() const { return n_kv * group; }
  int64_t q_width() const { return int64_t{n_heads()} * head_dim; }
  int64_t kv_width() const { return int64_t{n_kv} * head_dim; }
};

// Rows of F32 values.
struct Rows {
  Rows(int64_t rows, int64_t cols) : values(static_cast<size_t>(rows * cols)), tensor{nullptr, DType::kF32, rows, cols} {
    tensor.data = values.data();
  }
  const float* row(int64_t r) const { return values.data() + r * tensor.cols; }
  std::vector<float> values;
  Tensor tensor;
};

Rows RandomRows(int64_t rows, int64_t cols, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  Rows r(rows, cols);
  for (float& x : r.values) x = normal(rng);
  return r;
}

// One sequence's paged K and V caches (blocks of 16 slots, the block table reversed so that
// positions do not sit at their own slot numbers).
class Cache {
 public:
  Cache(const Heads& heads, DType dtype, int32_t positions)
      : layout_{16, heads.n_kv, heads.head_dim},
        n_blocks_(positions / layout_.block_size + 1),
        row_bytes_(DTypeRowBytes(dtype, heads.kv_width())),
        k_bytes_(static_cast<size_t>(n_blocks_) * layout_.block_size * row_bytes_),
        v_bytes_(k_bytes_),
        k_{k_bytes_.data(), dtype, int64_t{n_blocks_} * layout_.block_size, heads.kv_width()},
        v_{v_bytes_.data(), dtype, int64_t{n_blocks_} * layout_.block_size, heads.kv_width()} {
    for (int32_t b = 0; b < n_blocks_; ++b) block_table_.push_back(n_blocks_ - 1 - b);
  }
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  const KvLayout& layout() const { return layout_; }
  const int32_t* block_table() const { return block_table_.data(); }
  Tensor& k() { return k_; }
  Tensor& v() { return v_; }
  // Position p's K or V row widened to F32.
  std::vector<float> Row(const Tensor& cache, int32_t p) const {
    const int32_t slot = block_table_[p / layout_.block_size] * layout_.block_size + p % layout_.block_size;
    const uint8_t* bytes = static_cast<const uint8_t*>(cache.data) + static_cast<size_t>(slot) * row_bytes_;
    std::vector<float> row(static_cast<size_t>(cache.cols));
    for (int64_t i = 0; i < cache.cols; ++i) {
      if (cache.dtype == DType::kF32) {
        std::memcpy(&row[i], bytes + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        row[i] = F16ToF32(h);
      }
    }
    return row;
  }

 private:
  KvLayout layout_;
  int32_t n_blocks_;
  size_t row_bytes_;
  std::vector<uint8_t> k_bytes_, v_bytes_;
  Tensor k_, v_;
  std::vector<int32_t> block_table_;
};

// Attention of rows [first, first + n) of q, k and v as new tokens of the sequence whose
// positions `block_table` maps into `cache`, after `n_context` positions: a chain, or a tree
// with `mask` (n x (n_tree_context + n)) over the last n_tree_context positions of the context
// and the new tokens. Returns the n output rows.
Rows AttendIn(const Heads& heads, Cache& cache, const int32_t* block_table, const Rows& q, const Rows& k,
              const Rows& v, int64_t first, int32_t n, int32_t n_context, const std::vector<uint8_t>* mask = nullptr,
              int32_t n_tree_context = 0) {
  auto view = [&](const Rows& rows) {
    Tensor t = rows.tensor;
    t.data = const_cast<float*>(rows.row(first));
    t.rows = n;
    return t;
  };
  Rows out(n, heads.q_width());
  AttentionSequence seq;
  seq.block_table = block_table;
  seq.n_context = n_context;
  seq.n_new = n;
  seq.ancestor_mask = mask != nullptr ? mask->data() : nullptr;
  seq.n_tree_context = n_tree_context;
  Attention(view(q), view(k), view(v), heads.n_heads(), cache.layout(), cache.k(), cache.v(), {&seq, 1}, out.tensor);
  return out;
}

// AttendIn for the cache's one sequence.
Rows Attend(const Heads& heads, Cache& cache, const Rows& q, const Rows& k, const Rows& v, int64_t first, int32_t n,
            int32_t n_context, const std::vector<uint8_t>* mask = nullptr, int32_t n_tree_context = 0) {
  return AttendIn(heads, cache, cache.block_table(), q, k, v, first, n, n_context, mask, n_tree_context);
}

void ExpectSameBits(const float* a, const float* b, int64_t n, const std::string& what) {
  EXPECT_EQ(std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)), 0) << what;
}

// A chain: a prefill of n_context tokens, then n_new more in one call. Each output near the
// double-precision softmax attention over the cached rows (as stored: F16 rows rounded).
TEST(AttentionPathTest, ChainMatchesTheReference) {
  if (!CpuRunsThisBuild()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  for (const DType dtype : {DType::kF32, DType::kF16}) {
    for (const Heads heads : {Heads{2, 3, 64}, Heads{1, 1, 24}, Heads{4, 2, 8}}) {
      for (const int32_t n_context : {0, 5, 40}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << ", heads " << heads.n_kv << "x" << heads.group << "x"
                                          << heads.head_dim << ", context " << n_context);
        constexpr int32_t n_new = 3;
        std::mt19937_64 rng(n_context * 100 + heads.head_dim);
        const Rows q = RandomRows(n_context + n_new, heads.q_width(), rng);
        const Rows k = RandomRows(n_context + n_new, heads.kv_width(), rng);
        const Rows v = RandomRows(n_context + n_new, heads.kv_width(), rng);
        Cache cache(heads, dtype, n_context + n_new);
        if (n_context > 0) Attend(heads, cache, q, k, v, 0, n_context, 0);
        const Rows out = Attend(heads, cache, q, k, v, n_context, n_new, n_context);
        const double scale = 1.0 / std::sqrt(static_cast<double>(heads.head_dim));
        for (int32_t i = 0; i < n_new; ++i) {
          const int32_t position = n_context + i;
          for (int h = 0; h < heads.n_heads(); ++h) {
            const int64_t kv_offset = int64_t{h / heads.group} * heads.head_dim;
            const float* q_head = q.row(position) + int64_t{h} * heads.head_dim;
            std::vector<double> scores;
            for (int32_t p = 0; p <= position; ++p) {
              const std::vector<float> k_row = cache.Row(cache.k(), p);
              double dot = 0;
              for (int d = 0; d < heads.head_dim; ++d) dot += double{q_head[d]} * k_row[kv_offset + d];
              scores.push_back(dot * scale);
            }
            double max = scores[0], sum = 0;
            for (double s : scores) max = std::max(max, s);
            for (double& s : scores) sum += (s = std::exp(s - max));
            for (int d = 0; d < heads.head_dim; ++d) {
              double expected = 0;
              for (int32_t p = 0; p <= position; ++p) expected += scores[p] / sum * cache.Row(cache.v(), p)[kv_offset + d];
              ASSERT_NEAR(out.row(i)[int64_t{h} * heads.head_dim + d], expected, 1e-4 * (1 + std::abs(expected)))
                  << "token " << i << " head " << h << " dim " << d;
            }
          }
        }
      }
    }
  }
}

// The ancestors-or-self mask of `parents` (parents precede children; -1 is the context) over
// columns [column_of_first, column_of_first + n) for nodes [first, first + n_rows).
std::vector<uint8_t> AncestorMask(const std::vector<int32_t>& parents, int32_t first, int32_t n_rows,
                                  int32_t n_columns) {
  std::vector<uint8_t> mask(static_cast<size_t>(n_rows) * n_columns, 0);
  for (int32_t r = 0; r < n_rows; ++r) {
    for (int32_t node = first + r; node >= 0; node = parents[node]) mask[r * n_columns + node] = 1;
  }
  return mask;
}

// Each node of a tree gets the bits of its root-to-node path run as a chain after the same
// context, whether the tree comes in one call or its first nodes were cached by an earlier call
// (a drafter growing a tree a depth at a time).
TEST(AttentionPathTest, EachTreeNodeGetsItsPathsChainBits) {
  if (!CpuRunsThisBuild()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  const std::vector<int32_t> parents = {-1, 0, 0, 1, 1, 2, 4, -1, 7};  // two roots; node 6 at depth 3
  const int32_t n_nodes = static_cast<int32_t>(parents.size());
  for (const DType dtype : {DType::kF32, DType::kF16}) {
    for (const Heads heads : {Heads{2, 3, 64}, Heads{1, 2, 24}}) {
      for (const int32_t n_cached : {0, 3}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << ", head_dim " << heads.head_dim << ", " << n_cached
                                          << " nodes cached");
        constexpr int32_t n_context = 21;
        std::mt19937_64 rng(77 + heads.head_dim);
        const Rows q = RandomRows(n_context + n_nodes, heads.q_width(), rng);
        const Rows k = RandomRows(n_context + n_nodes, heads.kv_width(), rng);
        const Rows v = RandomRows(n_context + n_nodes, heads.kv_width(), rng);
        Cache tree_cache(heads, dtype, n_context + n_nodes);
        Attend(heads, tree_cache, q, k, v, 0, n_context, 0);
        std::vector<float> tree_out;
        if (n_cached > 0) {
          const std::vector<uint8_t> first_mask = AncestorMask(parents, 0, n_cached, n_cached);
          const Rows first = Attend(heads, tree_cache, q, k, v, n_context, n_cached, n_context, &first_mask, 0);
          tree_out = first.values;
        }
        const int32_t n_rest = n_nodes - n_cached;
        const std::vector<uint8_t> mask = AncestorMask(parents, n_cached, n_rest, n_nodes);
        const Rows rest =
            Attend(heads, tree_cache, q, k, v, n_context + n_cached, n_rest, n_context + n_cached, &mask, n_cached);
        tree_out.insert(tree_out.end(), rest.values.begin(), rest.values.end());

        for (int32_t node = 0; node < n_nodes; ++node) {
          std::vector<int32_t> path;
          for (int32_t i = node; i >= 0; i = parents[i]) path.insert(path.begin(), i);
          // The path's rows after the context, as a chain in a cache of its own.
          Rows path_q(n_context + static_cast<int64_t>(path.size()), heads.q_width());
          Rows path_k(path_q.tensor.rows, heads.kv_width()), path_v(path_q.tensor.rows, heads.kv_width());
          for (int64_t r = 0; r < path_q.tensor.rows; ++r) {
            const int64_t source = r < n_context ? r : n_context + path[r - n_context];
            std::memcpy(&path_q.values[r * heads.q_width()], q.row(source), heads.q_width() * sizeof(float));
            std::memcpy(&path_k.values[r * heads.kv_width()], k.row(source), heads.kv_width() * sizeof(float));
            std::memcpy(&path_v.values[r * heads.kv_width()], v.row(source), heads.kv_width() * sizeof(float));
          }
          Cache chain_cache(heads, dtype, static_cast<int32_t>(path_q.tensor.rows));
          Attend(heads, chain_cache, path_q, path_k, path_v, 0, n_context, 0);
          const Rows chain =
              Attend(heads, chain_cache, path_q, path_k, path_v, n_context, static_cast<int32_t>(path.size()), n_context);
          ExpectSameBits(&tree_out[node * heads.q_width()], chain.row(static_cast<int64_t>(path.size()) - 1),
                         heads.q_width(), "node " + std::to_string(node));
        }
      }
    }
  }
}

// Two sequences in one call, on 1 to 3 threads: each sequence's outputs are the bits it gets
// alone on one thread. The call is big enough to run in parallel.
TEST(AttentionPathTest, OutputsDependOnNeitherTheOtherSequencesNorTheThreads) {
  if (!CpuRunsThisBuild()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  const Heads heads{4, 2, 64};
  constexpr int32_t n_context[2] = {250, 37}, n_new[2] = {4, 2};
  for (const DType dtype : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    std::mt19937_64 rng(5);
    std::vector<Rows> q, k, v;
    for (int s = 0; s < 2; ++s) {
      q.push_back(RandomRows(n_context[s] + n_new[s], heads.q_width(), rng));
      k.push_back(RandomRows(n_context[s] + n_new[s], heads.kv_width(), rng));
      v.push_back(RandomRows(n_context[s] + n_new[s], heads.kv_width(), rng));
    }
    // Each alone, one thread.
    const int saved_threads = omp_get_max_threads();
    std::vector<Rows> alone;
    omp_set_num_threads(1);
    for (int s = 0; s < 2; ++s) {
      Cache cache(heads, dtype, n_context[s] + n_new[s]);
      Attend(heads, cache, q[s], k[s], v[s], 0, n_context[s], 0);
      alone.push_back(Attend(heads, cache, q[s], k[s], v[s], n_context[s], n_new[s], n_context[s]));
    }
    // Both sequences in one cache, on blocks of their own, their new rows side by side in one
    // call.
    Cache both(heads, dtype, n_context[0] + n_new[0] + 16 + n_context[1] + n_new[1]);
    const int32_t blocks0 = (n_context[0] + n_new[0]) / 16 + 1, blocks1 = (n_context[1] + n_new[1]) / 16 + 1;
    std::vector<int32_t> table[2];
    for (int32_t b = 0; b < blocks0; ++b) table[0].push_back(blocks0 - 1 - b);
    for (int32_t b = 0; b < blocks1; ++b) table[1].push_back(blocks0 + blocks1 - 1 - b);
    Rows q_both(n_new[0] + n_new[1], heads.q_width()), k_both(q_both.tensor.rows, heads.kv_width()),
        v_both(q_both.tensor.rows, heads.kv_width()), out(q_both.tensor.rows, heads.q_width());
    AttentionSequence seqs[2];
    for (int s = 0, row = 0; s < 2; ++s) {
      AttendIn(heads, both, table[s].data(), q[s], k[s], v[s], 0, n_context[s], 0);
      seqs[s].block_table = table[s].data();
      seqs[s].n_context = n_context[s];
      seqs[s].n_new = n_new[s];
      seqs[s].first_row = row;
      for (int32_t i = 0; i < n_new[s]; ++i, ++row) {
        std::memcpy(&q_both.values[row * heads.q_width()], q[s].row(n_context[s] + i), heads.q_width() * sizeof(float));
        std::memcpy(&k_both.values[row * heads.kv_width()], k[s].row(n_context[s] + i), heads.kv_width() * sizeof(float));
        std::memcpy(&v_both.values[row * heads.kv_width()], v[s].row(n_context[s] + i), heads.kv_width() * sizeof(float));
      }
    }
    // Each call stores the new rows again, the same bits.
    for (int threads = 1; threads <= 3; ++threads) {
      omp_set_num_threads(threads);
      Attention(q_both.tensor, k_both.tensor, v_both.tensor, heads.n_heads(), both.layout(), both.k(), both.v(),
                {seqs, 2}, out.tensor);
      ExpectSameBits(out.row(0), alone[0].row(0), n_new[0] * heads.q_width(), "sequence 0, threads " + std::to_string(threads));
      ExpectSameBits(out.row(n_new[0]), alone[1].row(0), n_new[1] * heads.q_width(),
                     "sequence 1, threads " + std::to_string(threads));
    }
    omp_set_num_threads(saved_threads);
  }
}

// A KV head's query heads run side by side, a few at a time: each head's outputs are the bits
// it gets as its KV head's only query head.
TEST(AttentionPathTest, EachQueryHeadGetsTheBitsItGetsAlone) {
  if (!CpuRunsThisBuild()) GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C";
  for (const DType dtype : {DType::kF32, DType::kF16}) {
    for (const int group : {2, 3, 5}) {
      for (const int head_dim : {64, 24}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << ", group " << group << ", head_dim " << head_dim);
        const Heads heads{2, group, head_dim};
        constexpr int32_t n_context = 19, n_new = 2;
        std::mt19937_64 rng(group * 10 + head_dim);
        const Rows q = RandomRows(n_context + n_new, heads.q_width(), rng);
        const Rows k = RandomRows(n_context + n_new, heads.kv_width(), rng);
        const Rows v = RandomRows(n_context + n_new, heads.kv_width(), rng);
        Cache cache(heads, dtype, n_context + n_new);
        Attend(heads, cache, q, k, v, 0, n_context, 0);
        const Rows together = Attend(heads, cache, q, k, v, n_context, n_new, n_context);
        const Heads single{2, 1, head_dim};
        for (int h = 0; h < group; ++h) {
          // Query head h of each KV head alone; the cache as it is (rewriting the new rows
          // stores the same bits).
          Rows q_alone(n_context + n_new, single.q_width());
          for (int32_t p = 0; p < n_context + n_new; ++p) {
            for (int j = 0; j < heads.n_kv; ++j) {
              std::memcpy(&q_alone.values[(p * heads.n_kv + j) * head_dim], q.row(p) + (j * group + h) * head_dim,
                          head_dim * sizeof(float));
            }
          }
          const Rows alone = Attend(single, cache, q_alone, k, v, n_context, n_new, n_context);
          for (int32_t i = 0; i < n_new; ++i) {
            for (int j = 0; j < heads.n_kv; ++j) {
              ExpectSameBits(alone.row(i) + j * head_dim, together.row(i) + (j * group + h) * head_dim, head_dim,
                             "token " + std::to_string(i) + " head " + std::to_string(h) + " of kv head " +
                                 std::to_string(j));
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace splitspec::engine::cpu
