// How the CPU backend holds an F16 or BF16 weight matrix with AVX-512, and an F32 one whose rows
// are long: its rows interleaved in groups of 4, so that one token's forward reads each stream of
// rows as one sequential run of bytes with four rows' accumulators behind it.
//
// Why: a row's dot product is one accumulator walking K in order (simd.h). Read a row at a time,
// decode waited on that chain and on two separate row streams a thread; in groups, a step reads
// the next vector of 4 rows from contiguous bytes into 4 independent accumulators, and a thread
// reads its groups as one sequential stream (matmul.cc). Each row's arithmetic is unchanged: the
// same vectors of the same row, in the same order, so the bits are those of the row-major
// matrix. A forward of several tokens reads a group as the row block of 4 rows its tiles take
// (an F32 one of 2-5 tokens two tokens a tile, as F32 rows are read: matmul.cc).
//
// Group g holds rows 4g .. 4g + 3 in the bytes of 4 rows: for each chunk c of kLanes columns,
// the 4 rows' chunk c one after another (4 x 32 bytes for F16 and BF16, 4 x 64 for F32).
// Matrices whose rows are not a multiple of 4, or whose columns are not a multiple of kLanes,
// stay row-major, as do F32 matrices of shorter rows and everything in builds without AVX-512
// (their kernels read several row streams a thread).
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_ROW_GROUPS_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_ROW_GROUPS_H_

#include <cstddef>
#include <cstdint>

#include "common/engine/cpu/simd.h"
#include "common/engine/tensor.h"

namespace splitspec::engine::cpu {

constexpr int kRowGroupRows = 4;

// The bytes of one row's kLanes weights: what a group holds of each row in turn.
inline size_t RowGroupChunkBytes(DType dtype) { return DTypeRowBytes(dtype, kLanes); }

// F32 matrices are held in groups from rows of this many columns (16 KB) on. Decode reads an F32
// row stream as it reads the groups, one accumulator a row, but with rows it loads the token's
// activations again for every row, and a long row's activations crowd the non-temporal lines
// in L1 (matmul_parts.h); in groups they are loaded once for 4 rows. Zen 5, 2 threads, 1 GB of
// matrices of one shape in turn with one token (a harness not kept), rows / groups, ms: 2048 x
// 5632 27.540 / 27.248, 29.838 / 26.910, 28.227 / 27.581, 25.985 / 24.691; 4096 x 11008
// 30.213 / 28.948, 30.862 / 29.700, 26.860 / 25.084; 4096 x 4096 27.773 / 26.993, 26.702 /
// 26.987, 27.837 / 26.007; at 2048 columns no order (11264 x 2048 26.446 / 25.523, 24.599 /
// 26.997, 18.429 / 19.266; 2048 x 2048 25.668 / 26.266, 26.813 / 25.177, 25.278 / 24.696).
// Decode steps of the large preset in F32 (its down projection grouped, a quarter of the
// weights), two copies of the model in one process stepping in turn, medians of 20-30 steps, 22
// rounds: groups faster in 17, median ratio 1.018 (13 of 15 rounds in slow minutes, 4 of 7 in
// fast ones); forwards of 4 and 16 tokens level or faster (66.42 / 66.29 ms, 72.28 / 72.42,
// 71.91 / 71.81; 119.10 / 116.49, 126.70 / 126.49, 115.01 / 114.39). Forwards of 2-5 tokens:
// ForwardRowGroups (matmul.cc).
constexpr int64_t kF32RowGroupMinCols = 4096;

// Whether this build holds any matrix in groups (AVX-512).
#if defined(__AVX512F__)
constexpr bool kRowGroupsBuilt = true;
#else
constexpr bool kRowGroupsBuilt = false;
#endif

// Whether Upload packs a matrix of `dtype` and this shape into groups.
inline bool HoldsInRowGroups(DType dtype, int64_t rows, int64_t cols) {
  const bool held = dtype == DType::kF16 || dtype == DType::kBF16 ||
                    (dtype == DType::kF32 && cols >= kF32RowGroupMinCols);
  return kRowGroupsBuilt && held && rows > 0 && rows % kRowGroupRows == 0 && cols > 0 && cols % kLanes == 0;
}

// Where row `row`'s first chunk lies in a grouped matrix of rows of `row_bytes` bytes, chunks of
// `chunk_bytes` (RowGroupChunkBytes); its chunk c lies c * kRowGroupRows chunks further on.
inline const uint8_t* RowInGroups(const uint8_t* w, size_t row_bytes, size_t chunk_bytes, int64_t row) {
  return w + static_cast<size_t>(row / kRowGroupRows) * kRowGroupRows * row_bytes +
         static_cast<size_t>(row % kRowGroupRows) * chunk_bytes;
}

// A weight format (simd.h's F32Weights, F16Weights or BF16Weights) read from a row of a grouped
// matrix (RowInGroups): element k of the row lies at element (k / kLanes) * kRowGroupRows *
// kLanes + k % kLanes from the row's start.
template <typename Format>
struct InRowGroups {
  static constexpr int kVectorBytes = Format::kVectorBytes;
  static int64_t Element(int64_t k) { return (k / kLanes) * kRowGroupRows * kLanes + k % kLanes; }
  static VecF Load(const uint8_t* row, int64_t k) { return Format::Load(row, k * kRowGroupRows); }
  static float Scalar(const uint8_t* row, int64_t k) { return Format::Scalar(row, Element(k)); }
};

// Rearranges a row-major matrix of `dtype` (HoldsInRowGroups) into groups, `grouped` holding as
// many bytes.
void PackRowGroups(const uint8_t* row_major, DType dtype, int64_t rows, int64_t cols, uint8_t* grouped);

// Row `row` of a grouped matrix, in f32, into out[0 .. cols) (embedding lookups).
void RowGroupsRowToF32(const uint8_t* grouped, DType dtype, int64_t cols, int64_t row, float* out);

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_ROW_GROUPS_H_
