// Weight-times-activations GEMM for the CPU backend: out (T, n_out) = x (T, K) W^T (n_out, K).
//
// Register blocking: a tile of kRowBlock weight rows x kTokenBlock tokens shares every load, so
// a 16-token verify costs little more weight traffic than a 1-token decode. Every output
// element still has exactly one accumulator that walks K in order (see simd.h), so the tile
// shape, the number of tokens and the thread that owns a row never change a result's bits.
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

template <typename WeightT>
inline VecF LoadWeight(const WeightT* p, DType dtype);
template <>
inline VecF LoadWeight<float>(const float* p, DType) { return Load(p); }
template <>
inline VecF LoadWeight<uint16_t>(const uint16_t* p, DType dtype) { return Load(p, dtype); }

// result[r][t] = dot(w_rows[r], x_rows[t]) for an RB x TB tile.
template <int RB, int TB, typename WeightT>
inline void DotTile(const WeightT* const* w_rows, const float* const* x_rows, int64_t n_in,
                    DType dtype, float result[RB][TB]) {
  VecF acc[RB][TB];
  for (int r = 0; r < RB; ++r)
    for (int t = 0; t < TB; ++t) acc[r][t] = Zero();
  int64_t k = 0;
  for (; k + kLanes <= n_in; k += kLanes) {
    VecF xv[TB];
    for (int t = 0; t < TB; ++t) xv[t] = Load(x_rows[t] + k);
    for (int r = 0; r < RB; ++r) {
      const VecF wv = LoadWeight(w_rows[r] + k, dtype);
      for (int t = 0; t < TB; ++t) acc[r][t] = Fma(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < RB; ++r) {
    for (int t = 0; t < TB; ++t) {
      float sum = ReduceAdd(acc[r][t]);
      for (int64_t kk = k; kk < n_in; ++kk) sum += LoadScalar(w_rows[r], kk, dtype) * x_rows[t][kk];
      result[r][t] = sum;
    }
  }
}

// One block of RB weight rows against tokens [t_begin, t_end).
template <int RB, typename WeightT>
void RowBlock(const WeightT* w, int64_t row0, int64_t n_in, DType dtype, const float* const* x_rows,
              int64_t t_begin, int64_t t_end, const float* bias, float* out, int64_t n_out) {
  const WeightT* w_rows[RB];
  for (int r = 0; r < RB; ++r) w_rows[r] = w + (row0 + r) * n_in;
  int64_t t = t_begin;
  for (; t + kTokenBlock <= t_end; t += kTokenBlock) {
    float result[RB][kTokenBlock];
    DotTile<RB, kTokenBlock>(w_rows, x_rows + t, n_in, dtype, result);
    for (int r = 0; r < RB; ++r)
      for (int j = 0; j < kTokenBlock; ++j)
        out[(t + j) * n_out + row0 + r] = result[r][j] + (bias ? bias[row0 + r] : 0.0f);
  }
  for (; t < t_end; ++t) {
    float result[RB][1];
    DotTile<RB, 1>(w_rows, x_rows + t, n_in, dtype, result);
    for (int r = 0; r < RB; ++r) out[t * n_out + row0 + r] = result[r][0] + (bias ? bias[row0 + r] : 0.0f);
  }
}

template <typename WeightT>
void MatMulTyped(const WeightT* w, DType dtype, int64_t n_out, int64_t n_in,
                 const std::vector<const float*>& x_rows, const float* bias, float* out) {
  const int64_t n_tokens = static_cast<int64_t>(x_rows.size());
  const int64_t n_full_blocks = n_out / kRowBlock;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
    const int64_t t1 = std::min(n_tokens, t0 + kTokenTile);
#pragma omp parallel for schedule(static)
    for (int64_t block = 0; block < n_full_blocks; ++block) {
      RowBlock<kRowBlock>(w, block * kRowBlock, n_in, dtype, x_rows.data(), t0, t1, bias, out, n_out);
    }
    for (int64_t row = n_full_blocks * kRowBlock; row < n_out; ++row) {
      RowBlock<1>(w, row, n_in, dtype, x_rows.data(), t0, t1, bias, out, n_out);
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
  if (w.dtype == DType::kF32) {
    MatMulTyped(static_cast<const float*>(w.data), w.dtype, w.rows, w.cols, x_rows, bias_data, out.f32());
  } else {
    MatMulTyped(static_cast<const uint16_t*>(w.data), w.dtype, w.rows, w.cols, x_rows, bias_data,
                out.f32());
  }
}

}  // namespace splitspec::engine::cpu
