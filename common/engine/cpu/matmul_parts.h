// What the CPU matmul kernels share: where a run of weight rows writes its outputs, and how the
// row blocks of one call are spread over the threads.
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_MATMUL_PARTS_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_MATMUL_PARTS_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"

namespace splitspec::engine::cpu {

// Where a run of W's rows goes: rows [first_row, first_row + n_cols) of W are columns
// [0, n_cols) of `out` (one part of a MatMulSplit; the whole of W for a plain MatMul).
struct OutputPart {
  float* out = nullptr;
  int64_t first_row = 0;
  int64_t n_cols = 0;
};

// Calls block(std::integral_constant<int, RB>, row0, part) for every run of rows: the full
// blocks of kRowBlock rows of all parts form one index space, split statically over the threads
// in one parallel region (a fork/join per projection would cost more than a small projection's
// compute); the rows left at the end of a part (< kRowBlock) then run serially with RB = 1.
// Every output element has one owner, so threading never changes a result.
template <int kRowBlock, typename BlockFn>
void ForEachRowBlock(absl::Span<const OutputPart> parts, bool parallel, BlockFn&& block) {
  int64_t n_blocks = 0;
  for (const OutputPart& part : parts) n_blocks += part.n_cols / kRowBlock;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t index = 0; index < n_blocks; ++index) {
    int64_t local = index;
    size_t p = 0;
    while (local >= parts[p].n_cols / kRowBlock) local -= parts[p++].n_cols / kRowBlock;
    block(std::integral_constant<int, kRowBlock>{}, parts[p].first_row + local * kRowBlock, parts[p]);
  }
  for (const OutputPart& part : parts) {
    for (int64_t col = part.n_cols / kRowBlock * kRowBlock; col < part.n_cols; ++col) {
      block(std::integral_constant<int, 1>{}, part.first_row + col, part);
    }
  }
}

// out = x W^T (+ bias) for a Q8_0 W (dtype.h) of n_rows x n_in, over tokens x_rows.
void MatMulQ8(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_in, absl::Span<const OutputPart> parts,
              const std::vector<const float*>& x_rows, const float* bias);

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_MATMUL_PARTS_H_
