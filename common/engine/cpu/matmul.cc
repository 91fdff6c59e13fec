// Weight-times-activations GEMM for the CPU backend: out (T, n_out) = x (T, K) W^T (n_out, K).
//
// Register blocking: a tile of kRowBlock weight rows x kTokenBlock tokens shares every load, so
// a 16-token verify costs little more weight traffic than a 1-token decode. Every output
// element still has exactly one accumulator that walks K in order (see simd.h), so the tile
// shape, the number of tokens and the thread that owns a row never change a result's bits.
//
// Decode is a stream over the weights, so its speed is the memory bandwidth we reach. A row
// block is kRowBlock short rows (768 elements: 3 KB in F32, 1.5 KB in F16) read side by side;
// each of those streams ends before the hardware prefetchers have ramped up, and a thread then
// stalls on every new block. So while computing block b we prefetch block b + kPrefetchBlocks
// into L2, spread evenly over b's k-steps. Measured on the medium model, 1 thread, batch 1:
// all matmuls of a forward 19.5 -> 14.0 ms (F32) and 14.4 -> 7.0 ms (F16).
#include <algorithm>
#include <vector>

#include "common/engine/cpu/kernels.h"
#include "common/engine/cpu/simd.h"

namespace splitspec::engine::cpu {
namespace {

#if defined(__AVX512F__)
constexpr int kRowBlock = 4;  // 16 accumulators + 4 activations + 1 weight of 32 registers
constexpr int kTokenBlock = 4;
#else
constexpr int kRowBlock = 2;  // fits the 16 AVX2 registers
constexpr int kTokenBlock = 4;
#endif
constexpr int64_t kTokenTile = 128;  // activations of one tile stay in L2 while W streams
// How far ahead (in row blocks) the prefetch runs: one block is too close to hide DRAM
// latency, four brought no further gain (measured 1, 2, 4; L2 rather than L1 measured better).
constexpr int kPrefetchBlocks = 2;
constexpr int kCacheLine = 64;

// result[r][t] = dot(w_rows[r], x_rows[t]) for an RB x TB tile. When `prefetch` is set, the
// RB rows' worth of bytes starting there are prefetched, kPrefetchBytesPerStep per k-step.
template <typename Format, int RB, int TB>
inline void DotTile(const typename Format::Elem* const* w_rows, const float* const* x_rows, int64_t n_in,
                    const char* prefetch, float result[RB][TB]) {
  constexpr int kPrefetchBytesPerStep = RB * kLanes * static_cast<int>(sizeof(typename Format::Elem));
  VecF acc[RB][TB];
  for (int r = 0; r < RB; ++r)
    for (int t = 0; t < TB; ++t) acc[r][t] = Zero();
  int64_t k = 0;
  for (; k + kLanes <= n_in; k += kLanes) {
    if (prefetch != nullptr) {
      const char* p = prefetch + (k / kLanes) * kPrefetchBytesPerStep;
      for (int line = 0; line < kPrefetchBytesPerStep; line += kCacheLine) PrefetchToL2(p + line);
    }
    VecF xv[TB];
    for (int t = 0; t < TB; ++t) xv[t] = Load(x_rows[t] + k);
    for (int r = 0; r < RB; ++r) {
      const VecF wv = Format::Load(w_rows[r] + k);
      for (int t = 0; t < TB; ++t) acc[r][t] = Fma(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < RB; ++r) {
    for (int t = 0; t < TB; ++t) {
      float sum = ReduceAdd(acc[r][t]);
      for (int64_t kk = k; kk < n_in; ++kk) sum += Format::Scalar(w_rows[r] + kk) * x_rows[t][kk];
      result[r][t] = sum;
    }
  }
}

// One block of RB weight rows against tokens [t_begin, t_end).
template <typename Format, int RB>
void RowBlock(const typename Format::Elem* w, int64_t row0, int64_t n_out, int64_t n_in,
              const float* const* x_rows, int64_t t_begin, int64_t t_end, const float* bias, float* out) {
  const typename Format::Elem* w_rows[RB];
  for (int r = 0; r < RB; ++r) w_rows[r] = w + (row0 + r) * n_in;
  // Only the first token tile of a block streams its rows from memory; later tiles find them
  // in cache, so they skip the prefetch.
  const int64_t ahead = row0 + kPrefetchBlocks * RB;
  const char* prefetch = ahead + RB <= n_out ? reinterpret_cast<const char*>(w + ahead * n_in) : nullptr;
  int64_t t = t_begin;
  for (; t + kTokenBlock <= t_end; t += kTokenBlock) {
    float result[RB][kTokenBlock];
    DotTile<Format, RB, kTokenBlock>(w_rows, x_rows + t, n_in, prefetch, result);
    prefetch = nullptr;
    for (int r = 0; r < RB; ++r)
      for (int j = 0; j < kTokenBlock; ++j)
        out[(t + j) * n_out + row0 + r] = result[r][j] + (bias ? bias[row0 + r] : 0.0f);
  }
  for (; t < t_end; ++t) {
    float result[RB][1];
    DotTile<Format, RB, 1>(w_rows, x_rows + t, n_in, prefetch, result);
    prefetch = nullptr;
    for (int r = 0; r < RB; ++r) out[t * n_out + row0 + r] = result[r][0] + (bias ? bias[row0 + r] : 0.0f);
  }
}

template <typename Format>
void MatMulTyped(const void* weights, int64_t n_out, int64_t n_in, const std::vector<const float*>& x_rows,
                 const float* bias, float* out) {
  const auto* w = static_cast<const typename Format::Elem*>(weights);
  const int64_t n_tokens = static_cast<int64_t>(x_rows.size());
  const int64_t n_full_blocks = n_out / kRowBlock;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
    const int64_t t1 = std::min(n_tokens, t0 + kTokenTile);
#pragma omp parallel for schedule(static)
    for (int64_t block = 0; block < n_full_blocks; ++block) {
      RowBlock<Format, kRowBlock>(w, block * kRowBlock, n_out, n_in, x_rows.data(), t0, t1, bias, out);
    }
    for (int64_t row = n_full_blocks * kRowBlock; row < n_out; ++row) {
      RowBlock<Format, 1>(w, row, n_out, n_in, x_rows.data(), t0, t1, bias, out);
    }
  }
}

}  // namespace

void MatMul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
            absl::Span<const int32_t> rows) {
  std::vector<const float*> x_rows;
  if (rows.empty()) {
    x_rows.reserve(x.rows);
    for (int64_t t = 0; t < x.rows; ++t) x_rows.push_back(x.row(t));
  } else {
    x_rows.reserve(rows.size());
    for (int32_t r : rows) x_rows.push_back(x.row(r));
  }
  const float* bias_data = bias ? bias->f32() : nullptr;
  switch (w.dtype) {
    case DType::kF32: return MatMulTyped<F32Weights>(w.data, w.rows, w.cols, x_rows, bias_data, out.f32());
    case DType::kF16: return MatMulTyped<F16Weights>(w.data, w.rows, w.cols, x_rows, bias_data, out.f32());
    case DType::kBF16: return MatMulTyped<BF16Weights>(w.data, w.rows, w.cols, x_rows, bias_data, out.f32());
  }
}

}  // namespace splitspec::engine::cpu
