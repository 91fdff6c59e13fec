// What the CPU matmul kernels share: where a run of weight rows writes its outputs, and how the
// row blocks of one call are spread over the threads.
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_MATMUL_PARTS_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_MATMUL_PARTS_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"
#include "common/engine/cpu/simd.h"

namespace splitspec::engine::cpu {

// Where a run of W's rows goes: rows [first_row, first_row + n_cols) of W are columns
// [0, n_cols) of `out` (one part of a MatMulSplit; the whole of W for a plain MatMul).
struct OutputPart {
  float* out = nullptr;
  int64_t first_row = 0;
  int64_t n_cols = 0;
};

// Decode streams each weight row block once, and a block's short rows end before the hardware
// prefetchers ramp up, so a kernel working on row block b asks for block b + kPrefetchBlocks,
// spread over b's steps. One block ahead is too close to hide DRAM latency, four brought no
// further gain (measured 1, 2, 4; L2 rather than L1 measured better).
constexpr int kPrefetchBlocks = 2;
constexpr int kCacheLine = 64;

// The first byte of the rows to prefetch while working on the RB rows from row0 (W's rows are
// contiguous, so this runs on across the parts of a MatMulSplit), or nullptr past W's end.
inline const char* RowsToPrefetch(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t row0, int rb) {
  const int64_t ahead = row0 + kPrefetchBlocks * rb;
  return ahead + rb <= n_rows ? reinterpret_cast<const char*>(w + ahead * row_bytes) : nullptr;
}

// Step `step`'s share of a prefetch (`bytes_per_step` bytes from prefetch + step * bytes_per_step)
// into L2; nothing when `prefetch` is nullptr. No effect on results.
inline void PrefetchStep(const char* prefetch, int64_t step, size_t bytes_per_step) {
  if (prefetch == nullptr) return;
  const char* p = prefetch + step * bytes_per_step;
  for (size_t line = 0; line < bytes_per_step; line += kCacheLine) PrefetchToL2(p + line);
}

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
