// Per-op conformance of the CUDA backend against the CPU backend (the reference semantics),
// over shapes with odd sizes, GQA and token trees, plus the GPU sampling helpers and the
// batch invariance the speculative path relies on. Built twice: against a GPU (cuda_test) and
// against the CPU emulation of CUDA (cuda_emulated_test, run in CI); the tolerances are the same.
//
// Tolerances (relative to the largest reference magnitude, at least 1):
//  - elementwise f32 ops (embedding, add, silu-mul, rope): 1e-5 (expf/cosf/sinf vs libm ulps);
//  - reductions in f32 (rmsnorm, attention, warp matmul with f32/f16/bf16 weights): 1e-4, the
//    reduction order differs from the CPU's SIMD lanes, the weights' values are the same;
//  - the cuBLAS path with f16 / bf16 weights rounds activations to the weights' dtype:
//    2e-3 (f16, 11-bit mantissa) and 1.6e-2 (bf16, 8-bit mantissa) of sqrt(K)-scaled sums.
#include <cuda_runtime.h>

#include <gtest/gtest-spi.h>

#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/engine/cuda/sampling.cuh"
#include "common/engine/model/quantize.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace splitspec::engine::testing {
namespace {

using CudaOpsTest = CudaTest;

// The comparison itself: a NaN on one side fails, wherever it sits (a broken kernel often
// produces NaN from uninitialised shared memory; a max over |diff| must not skip it).
TEST(ExpectNearTest, ANanAgainstANumberFailsWhereverItIs) {
  EXPECT_NONFATAL_FAILURE(ExpectNear({1, 2, 3}, {1, NAN, 3}, 1e-3f, "x"), "element 1");
  EXPECT_NONFATAL_FAILURE(ExpectNear({1, 2, 3}, {NAN, 2, 3.5f}, 1e-3f, "x"), "element 0");
  ExpectNear({1, NAN}, {1, NAN}, 0.0f, "both NaN agree");
}

TEST_F(CudaOpsTest, EmbeddingGathersEveryDtype) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    const int vocab = 37, dim = 67;
    const std::vector<float> table = RandomValues(vocab * dim, 1);
    const std::vector<int32_t> tokens = {5, 0, 36, 5, 17};
    Tensor table_cpu = Make(*cpu_, table, vocab, dim, dtype), table_gpu = Make(*cuda_, table, vocab, dim, dtype);
    Tensor out_cpu = Make(*cpu_, std::vector<float>(5 * dim), 5, dim), out_gpu = Make(*cuda_, std::vector<float>(5 * dim), 5, dim);
    cpu_->Embed(table_cpu, tokens, out_cpu);
    cuda_->Embed(table_gpu, tokens, out_gpu);
    ExpectNear(Read(*cpu_, out_cpu), Read(*cuda_, out_gpu), 0.0f, std::string(DTypeName(dtype)));
  }
}

TEST_F(CudaOpsTest, RmsNormAddSiluMulRope) {
  const int rows = 7, dim = 96, heads = 3, head_dim = 32;
  const std::vector<float> x = RandomValues(rows * dim, 2), w = RandomValues(dim, 3);
  Tensor x_cpu = Make(*cpu_, x, rows, dim), x_gpu = Make(*cuda_, x, rows, dim);
  Tensor w_cpu = Make(*cpu_, w, 1, dim), w_gpu = Make(*cuda_, w, 1, dim);
  Tensor o_cpu = Make(*cpu_, std::vector<float>(rows * dim), rows, dim);
  Tensor o_gpu = Make(*cuda_, std::vector<float>(rows * dim), rows, dim);
  cpu_->RmsNorm(x_cpu, w_cpu, 1e-5f, o_cpu);
  cuda_->RmsNorm(x_gpu, w_gpu, 1e-5f, o_gpu);
  ExpectNear(Read(*cpu_, o_cpu), Read(*cuda_, o_gpu), 1e-4f, "rmsnorm");

  cpu_->Add(o_cpu, x_cpu);
  cuda_->Add(o_gpu, x_gpu);
  ExpectNear(Read(*cpu_, o_cpu), Read(*cuda_, o_gpu), 1e-4f, "add");

  const std::vector<float> gate_up = RandomValues(rows * 2 * dim, 4, 3.0f);
  Tensor g_cpu = Make(*cpu_, gate_up, rows, 2 * dim), g_gpu = Make(*cuda_, gate_up, rows, 2 * dim);
  cpu_->SiluMul(g_cpu, o_cpu);
  cuda_->SiluMul(g_gpu, o_gpu);
  ExpectNear(Read(*cpu_, o_cpu), Read(*cuda_, o_gpu), 1e-5f, "silu_mul");

  RopeTables tables;
  tables.head_dim = head_dim;
  for (int i = 0; i < head_dim / 2; ++i) tables.inv_freq.push_back(std::pow(10000.0f, -2.0f * i / head_dim));
  const std::vector<int32_t> positions = {0, 1, 2, 17, 255, 1000, 4095};
  cpu_->Rope(x_cpu, heads, tables, positions);
  cuda_->Rope(x_gpu, heads, tables, positions);
  // Angles up to 4095 rad: cosf/sinf range reduction differs from libm by a few ulps of 1.
  ExpectNear(Read(*cpu_, x_cpu), Read(*cuda_, x_gpu), 1e-5f, "rope");
}

struct MatMulCase {
  DType dtype;
  bool use_cublas;
  float tolerance;
};

TEST_F(CudaOpsTest, MatMulMatchesCpuForEveryDtypeAndPath) {
  const std::vector<MatMulCase> cases = {
      {DType::kF32, false, 1e-4f}, {DType::kF16, false, 1e-4f}, {DType::kBF16, false, 1e-4f},
      {DType::kF32, true, 1e-4f},  {DType::kF16, true, 2e-3f},  {DType::kBF16, true, 1.6e-2f},
  };
  for (const MatMulCase& c : cases) {
    auto backend = CreateCudaBackend({.device = 0, .use_cublas = c.use_cublas});
    ASSERT_TRUE(backend.ok()) << backend.status();
    CudaBackend& gpu = **backend;
    // k = 67: the scalar kernel (no vector-width assumptions); k = 256: 16-byte weight chunks.
    for (auto [tokens, k] : {std::pair{1, 67}, std::pair{5, 67}, std::pair{17, 67}, std::pair{1, 256},
                             std::pair{6, 256}}) {
      const int n_out = 33;
      const std::vector<float> x = RandomValues(tokens * k, 10 + tokens), w = RandomValues(n_out * k, 5, 0.2f);
      const std::vector<float> bias = RandomValues(n_out, 6);
      Tensor x_cpu = Make(*cpu_, x, tokens, k), x_gpu = Make(gpu, x, tokens, k);
      Tensor w_cpu = Make(*cpu_, w, n_out, k, c.dtype), w_gpu = Make(gpu, w, n_out, k, c.dtype);
      Tensor b_cpu = Make(*cpu_, bias, 1, n_out), b_gpu = Make(gpu, bias, 1, n_out);
      const std::string what = absl::StrCat(std::string(DTypeName(c.dtype)), c.use_cublas ? " cublas" : " warp", " T=", tokens, " K=", k);
      Tensor o_cpu = Make(*cpu_, std::vector<float>(tokens * n_out), tokens, n_out);
      Tensor o_gpu = Make(gpu, std::vector<float>(tokens * n_out), tokens, n_out);
      cpu_->MatMul(x_cpu, w_cpu, &b_cpu, o_cpu);
      gpu.MatMul(x_gpu, w_gpu, &b_gpu, o_gpu);
      ExpectNear(Read(*cpu_, o_cpu), Read(gpu, o_gpu), c.tolerance, what);
      // A subset of rows, out of order (the lm_head's logit rows), into a two-row output (a
      // single-token input has more selected rows than input rows).
      std::vector<int32_t> rows = {tokens - 1, 0};
      Tensor r_cpu = Make(*cpu_, std::vector<float>(2 * n_out), 2, n_out);
      Tensor r_gpu = Make(gpu, std::vector<float>(2 * n_out), 2, n_out);
      cpu_->MatMul(x_cpu, w_cpu, nullptr, r_cpu, rows);
      gpu.MatMul(x_gpu, w_gpu, nullptr, r_gpu, rows);
      ExpectNear(Read(*cpu_, r_cpu), Read(gpu, r_gpu), c.tolerance, what + " rows");
    }
    ASSERT_TRUE(gpu.Synchronize().ok()) << gpu.status();
  }
}

// The warp kernel's result for a token does not depend on how many tokens share the launch.
TEST_F(CudaOpsTest, WarpMatMulIsBatchInvariant) {
  const int n_out = 19, tokens = 13;
  for (int k : {257, 264}) {  // the scalar and the 16-byte-chunk kernels
    const std::vector<float> x = RandomValues(tokens * k, 20), w = RandomValues(n_out * k, 21);
    Tensor w_gpu = Make(*cuda_, w, n_out, k, DType::kBF16);
    Tensor x_all = Make(*cuda_, x, tokens, k);
    Tensor o_all = Make(*cuda_, std::vector<float>(tokens * n_out), tokens, n_out);
    cuda_->MatMul(x_all, w_gpu, nullptr, o_all);
    const std::vector<float> all = Read(*cuda_, o_all);
    for (int t = 0; t < tokens; ++t) {
      Tensor x_one = Make(*cuda_, std::vector<float>(x.begin() + t * k, x.begin() + (t + 1) * k), 1, k);
      Tensor o_one = Make(*cuda_, std::vector<float>(n_out), 1, n_out);
      cuda_->MatMul(x_one, w_gpu, nullptr, o_one);
      const std::vector<float> one = Read(*cuda_, o_one);
      for (int n = 0; n < n_out; ++n) {
        ASSERT_EQ(one[n], all[t * n_out + n]) << "k " << k << " token " << t << " row " << n;
      }
    }
  }
}

// Q8_0 weights (--quantize int8): the table and matrices as the loader quantizes them, on both
// backends. Both round the activations to int8 by the same rule and sum each block's products
// exactly; only the f32 accumulation of the scaled block sums differs in order (1e-4, as the
// other reductions: the inputs here sit on no rounding boundary). The embedding is exact. A
// token's product does not depend on its batch.
TEST_F(CudaOpsTest, Q8WeightsMatchTheCpuKernelsAndAreBatchInvariant) {
  auto upload_q8 = [](Backend& backend, const std::vector<float>& values, int64_t rows, int64_t cols) {
    absl::StatusOr<std::vector<uint8_t>> q8 = QuantizeQ8(values, rows, cols);
    EXPECT_TRUE(q8.ok()) << q8.status();
    absl::StatusOr<Tensor> t = backend.Allocate(DType::kQ8_0, rows, cols);
    EXPECT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->n_bytes(), q8->size());
    backend.Upload(q8->data(), *t);
    return *t;
  };
  const int vocab = 37, dim = 96;
  const std::vector<float> table = RandomValues(vocab * dim, 30);
  const std::vector<int32_t> tokens = {5, 0, 36, 5, 17};
  Tensor table_cpu = upload_q8(*cpu_, table, vocab, dim), table_gpu = upload_q8(*cuda_, table, vocab, dim);
  Tensor e_cpu = Make(*cpu_, std::vector<float>(5 * dim), 5, dim), e_gpu = Make(*cuda_, std::vector<float>(5 * dim), 5, dim);
  cpu_->Embed(table_cpu, tokens, e_cpu);
  cuda_->Embed(table_gpu, tokens, e_gpu);
  ExpectNear(Read(*cpu_, e_cpu), Read(*cuda_, e_gpu), 0.0f, "Q8_0 embedding");

  const int n_out = 37;
  // k = 96: three blocks a row, an odd count (the values are not 4-byte aligned); k = 256 and
  // 768: 8 and 24 blocks, 21 tokens over six token tiles.
  for (auto [n_tokens, k] : {std::pair{1, 96}, std::pair{5, 96}, std::pair{17, 256}, std::pair{6, 256}, std::pair{21, 768}}) {
    const std::vector<float> x = RandomValues(n_tokens * k, 40 + n_tokens), w = RandomValues(n_out * k, 41, 0.2f);
    const std::vector<float> bias = RandomValues(n_out, 42);
    Tensor x_cpu = Make(*cpu_, x, n_tokens, k), x_gpu = Make(*cuda_, x, n_tokens, k);
    Tensor w_cpu = upload_q8(*cpu_, w, n_out, k), w_gpu = upload_q8(*cuda_, w, n_out, k);
    Tensor b_cpu = Make(*cpu_, bias, 1, n_out), b_gpu = Make(*cuda_, bias, 1, n_out);
    const std::string what = absl::StrCat("Q8_0 T=", n_tokens, " K=", k);
    Tensor o_cpu = Make(*cpu_, std::vector<float>(n_tokens * n_out), n_tokens, n_out);
    Tensor o_gpu = Make(*cuda_, std::vector<float>(n_tokens * n_out), n_tokens, n_out);
    cpu_->MatMul(x_cpu, w_cpu, &b_cpu, o_cpu);
    cuda_->MatMul(x_gpu, w_gpu, &b_gpu, o_gpu);
    const std::vector<float> all = Read(*cuda_, o_gpu);
    ExpectNear(Read(*cpu_, o_cpu), all, 1e-4f, what);
    std::vector<int32_t> rows = {n_tokens - 1, 0};
    Tensor r_cpu = Make(*cpu_, std::vector<float>(2 * n_out), 2, n_out);
    Tensor r_gpu = Make(*cuda_, std::vector<float>(2 * n_out), 2, n_out);
    cpu_->MatMul(x_cpu, w_cpu, nullptr, r_cpu, rows);
    cuda_->MatMul(x_gpu, w_gpu, nullptr, r_gpu, rows);
    ExpectNear(Read(*cpu_, r_cpu), Read(*cuda_, r_gpu), 1e-4f, what + " rows");
    for (int t = 0; t < n_tokens; ++t) {
      Tensor x_one = Make(*cuda_, std::vector<float>(x.begin() + t * k, x.begin() + (t + 1) * k), 1, k);
      Tensor o_one = Make(*cuda_, std::vector<float>(n_out), 1, n_out);
      cuda_->MatMul(x_one, w_gpu, &b_gpu, o_one);
      const std::vector<float> one = Read(*cuda_, o_one);
      for (int n = 0; n < n_out; ++n) ASSERT_EQ(one[n], all[t * n_out + n]) << what << " token " << t << " row " << n;
    }
  }
}

// Attention over a paged cache: two sequences (a chain with context, and a tree), GQA, odd
// lengths, a block size that splits them across blocks in scrambled physical order. Twice: a
// short context with heads narrower than a warp, and a context longer than the block's threads
// (every warp sums a share of the keys) with heads wider than a warp, not a multiple of it.
TEST_F(CudaOpsTest, PagedTreeAttentionMatchesCpu) {
  struct Shape {
    int head_dim, n_context0;
  };
  for (const Shape shape : {Shape{16, 9}, Shape{80, 290}}) {
    const int n_heads = 4, n_heads_kv = 2, head_dim = shape.head_dim, block_size = 4;
    const KvLayout layout{block_size, n_heads_kv, head_dim};
    const int kv_cols = n_heads_kv * head_dim, q_cols = n_heads * head_dim;
    // Sequence 0: n_context0 context tokens + chain of 3. Sequence 1: 2 context tokens + tree
    // of 5. Sequence 0's blocks in scrambled order (a stride coprime to the count), then 1's.
    const int blocks0 = (shape.n_context0 + 3 + block_size - 1) / block_size, n_blocks = blocks0 + 2;
    std::vector<int32_t> table0(blocks0);
    for (int b = 0; b < blocks0; ++b) table0[b] = (b * 7 + 3) % blocks0;
    ASSERT_EQ(std::gcd(7, blocks0), 1);
    const std::vector<int32_t> table1 = {blocks0 + 1, blocks0};
    const std::vector<int32_t> parents = {-1, 0, 0, 1, 2};
    std::vector<uint8_t> mask(25, 0);
    for (int i = 0; i < 5; ++i) {
      if (parents[i] >= 0) std::copy_n(&mask[parents[i] * 5], parents[i] + 1, &mask[i * 5]);
      mask[i * 5 + i] = 1;
    }
    const int n_rows = 8;
    const std::vector<float> q = RandomValues(n_rows * q_cols, 30), k = RandomValues(n_rows * kv_cols, 31);
    const std::vector<float> v = RandomValues(n_rows * kv_cols, 32);
    const std::vector<float> cache = RandomValues(n_blocks * block_size * kv_cols, 33);
    std::vector<float> results[2];
    for (int b = 0; b < 2; ++b) {
      Backend& backend = b == 0 ? *cpu_ : static_cast<Backend&>(*cuda_);
      Tensor tq = Make(backend, q, n_rows, q_cols), tk = Make(backend, k, n_rows, kv_cols);
      Tensor tv = Make(backend, v, n_rows, kv_cols);
      Tensor kc = Make(backend, cache, n_blocks * block_size, kv_cols);
      Tensor vc = Make(backend, RandomValues(cache.size(), 34), n_blocks * block_size, kv_cols);
      Tensor out = Make(backend, std::vector<float>(n_rows * q_cols), n_rows, q_cols);
      const std::vector<AttentionSequence> seqs = {{table0.data(), shape.n_context0, 3, 0, nullptr},
                                                   {table1.data(), 2, 5, 3, mask.data()}};
      backend.Attention(tq, tk, tv, n_heads, layout, kc, vc, seqs, out);
      results[b] = Read(backend, out);
      // The cache must hold the new rows too: compare it as part of the result.
      const std::vector<float> kc_host = Read(backend, kc);
      results[b].insert(results[b].end(), kc_host.begin(), kc_host.end());
    }
    ExpectNear(results[0], results[1], 1e-4f, absl::StrCat("attention, head_dim ", head_dim));
  }
}

// A tree node's attention equals, bit for bit, the same path attended as a plain chain: the
// speculative path's exactness rests on it. The node's masked siblings sit between its
// ancestors, so a kernel that assigns keys to lanes by position rather than by rank among the
// visible keys sums the softmax denominator in a different order here.
TEST_F(CudaOpsTest, TreeNodeAttentionEqualsItsChainBitForBit) {
  const int n_heads = 4, n_heads_kv = 2, head_dim = 16, block_size = 4, n_blocks = 96;
  const KvLayout layout{block_size, n_heads_kv, head_dim};
  const int kv_cols = n_heads_kv * head_dim, q_cols = n_heads * head_dim;
  // Tree: 0 -> {1, 2}, 2 -> {3, 4}, 4 -> {5, 6}, 6 -> 7; node 7's path is 0, 2, 4, 6, 7.
  const std::vector<int32_t> parents = {-1, 0, 0, 2, 2, 4, 4, 6};
  const int n_tree = static_cast<int>(parents.size());
  std::vector<uint8_t> mask(n_tree * n_tree, 0);
  for (int i = 0; i < n_tree; ++i) {
    if (parents[i] >= 0) std::copy_n(&mask[parents[i] * n_tree], parents[i] + 1, &mask[i * n_tree]);
    mask[i * n_tree + i] = 1;
  }
  const std::vector<int> path = {0, 2, 4, 6, 7};
  const int n_path = static_cast<int>(path.size());
  // Contexts within one warp, across warps, and past the block's 128 threads.
  for (int n_context : {5, 37, 61, 126, 150}) {
    const int blocks_per_seq = (n_context + n_tree + block_size - 1) / block_size;
    std::vector<int32_t> tree_table(blocks_per_seq), chain_table(blocks_per_seq);
    for (int b = 0; b < blocks_per_seq; ++b) tree_table[b] = b, chain_table[b] = blocks_per_seq + b;
    // Both sequences hold the same context keys and values, in different blocks.
    std::vector<float> k_cache = RandomValues(n_blocks * block_size * kv_cols, 70 + n_context);
    std::vector<float> v_cache = RandomValues(n_blocks * block_size * kv_cols, 71 + n_context);
    std::copy_n(k_cache.begin(), blocks_per_seq * block_size * kv_cols, k_cache.begin() + blocks_per_seq * block_size * kv_cols);
    std::copy_n(v_cache.begin(), blocks_per_seq * block_size * kv_cols, v_cache.begin() + blocks_per_seq * block_size * kv_cols);
    // Rows: the tree's nodes, then the chain (the path's q/k/v rows).
    const std::vector<float> tree_q = RandomValues(n_tree * q_cols, 72), tree_k = RandomValues(n_tree * kv_cols, 73);
    const std::vector<float> tree_v = RandomValues(n_tree * kv_cols, 74);
    std::vector<float> q = tree_q, k = tree_k, v = tree_v;
    for (int node : path) {
      q.insert(q.end(), tree_q.begin() + node * q_cols, tree_q.begin() + (node + 1) * q_cols);
      k.insert(k.end(), tree_k.begin() + node * kv_cols, tree_k.begin() + (node + 1) * kv_cols);
      v.insert(v.end(), tree_v.begin() + node * kv_cols, tree_v.begin() + (node + 1) * kv_cols);
    }
    const int n_rows = n_tree + n_path;
    Tensor tq = Make(*cuda_, q, n_rows, q_cols), tk = Make(*cuda_, k, n_rows, kv_cols);
    Tensor tv = Make(*cuda_, v, n_rows, kv_cols);
    Tensor kc = Make(*cuda_, k_cache, n_blocks * block_size, kv_cols);
    Tensor vc = Make(*cuda_, v_cache, n_blocks * block_size, kv_cols);
    Tensor out = Make(*cuda_, std::vector<float>(n_rows * q_cols), n_rows, q_cols);
    const std::vector<AttentionSequence> seqs = {{tree_table.data(), n_context, n_tree, 0, mask.data()},
                                                 {chain_table.data(), n_context, n_path, n_tree, nullptr}};
    cuda_->Attention(tq, tk, tv, n_heads, layout, kc, vc, seqs, out);
    const std::vector<float> result = Read(*cuda_, out);
    for (int i = 0; i < n_path; ++i) {
      for (int c = 0; c < q_cols; ++c) {
        ASSERT_EQ(result[path[i] * q_cols + c], result[(n_tree + i) * q_cols + c])
            << "context " << n_context << " node " << path[i] << " column " << c;
      }
    }
  }
}

TEST_F(CudaOpsTest, CopyKvSlotsMovesInOrder) {
  const int slots = 12, cols = 9;
  const std::vector<float> kc = RandomValues(slots * cols, 40), vc = RandomValues(slots * cols, 41);
  const std::vector<int32_t> src = {3, 4, 9}, dst = {2, 3, 4};  // overlapping, increasing dst
  std::vector<float> results[2];
  for (int b = 0; b < 2; ++b) {
    Backend& backend = b == 0 ? *cpu_ : static_cast<Backend&>(*cuda_);
    Tensor tk = Make(backend, kc, slots, cols), tv = Make(backend, vc, slots, cols);
    backend.CopyKvSlots(tk, tv, src, dst);
    results[b] = Read(backend, tk);
    const std::vector<float> v_host = Read(backend, tv);
    results[b].insert(results[b].end(), v_host.begin(), v_host.end());
  }
  ExpectNear(results[0], results[1], 0.0f, "copy_kv_slots");
}

TEST_F(CudaOpsTest, ArgmaxAndSoftmaxMatchHostReferences) {
  const int rows = 3, vocab = 1001;
  std::vector<float> logits = RandomValues(rows * vocab, 50, 4.0f);
  logits[1 * vocab + 10] = logits[1 * vocab + 900] = 100.0f;  // a tie: the lower index wins
  Tensor t = Make(*cuda_, logits, rows, vocab);
  Tensor probs = Make(*cuda_, std::vector<float>(rows * vocab), rows, vocab);
  int32_t* ids = nullptr;
  ASSERT_EQ(cudaMalloc(&ids, rows * sizeof(int32_t)), cudaSuccess);
  cudaStream_t stream = static_cast<cudaStream_t>(cuda_->stream());
  ASSERT_EQ(cuda::LaunchArgmax(t.f32(), rows, vocab, ids, stream), cudaSuccess);
  ASSERT_EQ(cuda::LaunchSoftmax(t.f32(), rows, vocab, 0.7f, probs.f32(), stream), cudaSuccess);
  std::vector<int32_t> got(rows);
  ASSERT_EQ(cudaMemcpyAsync(got.data(), ids, rows * sizeof(int32_t), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaFree(ids);
  std::vector<float> expected_probs(logits.size());
  for (int r = 0; r < rows; ++r) {
    const float* row = &logits[r * vocab];
    EXPECT_EQ(got[r], std::max_element(row, row + vocab) - row) << "row " << r;
    const float max_value = *std::max_element(row, row + vocab) / 0.7f;
    double sum = 0;
    for (int i = 0; i < vocab; ++i) sum += std::exp(row[i] / 0.7f - max_value);
    for (int i = 0; i < vocab; ++i) expected_probs[r * vocab + i] = std::exp(row[i] / 0.7f - max_value) / sum;
  }
  EXPECT_EQ(got[1], 10);
  ExpectNear(expected_probs, Read(*cuda_, probs), 1e-5f, "softmax");
}

}  // namespace
}  // namespace splitspec::engine::testing
