// How the CPU backend holds an F16 or BF16 weight matrix with AVX-512: its rows interleaved in
// groups of 4, so that one token's forward reads each stream of rows as one sequential run of
// bytes with four rows' accumulators behind it.
//
// Why: a row's dot product is one accumulator walking K in order (simd.h). Read a row at a time,
// decode waited on that chain and on two separate row streams a thread; in groups, a step reads
// the next vector of 4 rows from 128 contiguous bytes into 4 independent accumulators, and a
// thread reads its groups as one sequential stream (matmul.cc). Each row's arithmetic is
// unchanged: the same vectors of the same row, in the same order, so the bits are those of the
// row-major matrix. A forward of several tokens reads a group as the row block of 4 rows its
// tiles take.
//
// Group g holds rows 4g .. 4g + 3 in the bytes of 4 rows: for each chunk c of kLanes columns,
// the 4 rows' chunk c one after another (4 x 32 bytes for F16 and BF16). Matrices whose rows are
// not a multiple of 4, or whose columns are not a multiple of kLanes, stay row-major, as does
// everything in builds without AVX-512 (their kernels read several row streams a thread).
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_ROW_GROUPS_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_ROW_GROUPS_H_

#include <cstddef>
#include <cstdint>

#include "common/engine/cpu/simd.h"
#include "common/engine/tensor.h"

namespace splitspec::engine::cpu {

constexpr int kRowGroupRows = 4;
constexpr size_t kRowGroupChunkBytes = 2 * kLanes;  // one row's kLanes weights (F16 or BF16)

// Whether this build holds any matrix in groups (AVX-512).
#if defined(__AVX512F__)
constexpr bool kRowGroupsBuilt = true;
#else
constexpr bool kRowGroupsBuilt = false;
#endif

// Whether Upload packs a matrix of `dtype` and this shape into groups.
inline bool HoldsInRowGroups(DType dtype, int64_t rows, int64_t cols) {
  return kRowGroupsBuilt && (dtype == DType::kF16 || dtype == DType::kBF16) && rows > 0 &&
         rows % kRowGroupRows == 0 && cols > 0 && cols % kLanes == 0;
}

// Where row `row`'s first chunk lies in a grouped matrix of rows of `row_bytes` bytes (F16 or
// BF16: 2 bytes a weight); its chunk c lies c * kRowGroupRows chunks further on.
inline const uint8_t* RowInGroups(const uint8_t* w, size_t row_bytes, int64_t row) {
  return w + static_cast<size_t>(row / kRowGroupRows) * kRowGroupRows * row_bytes +
         static_cast<size_t>(row % kRowGroupRows) * kRowGroupChunkBytes;
}

// A weight format (simd.h's F16Weights or BF16Weights) read from a row of a grouped matrix
// (RowInGroups): element k of the row lies at element (k / kLanes) * kRowGroupRows * kLanes +
// k % kLanes from the row's start.
template <typename Format>
struct InRowGroups {
  static constexpr int kVectorBytes = Format::kVectorBytes;
  static int64_t Element(int64_t k) { return (k / kLanes) * kRowGroupRows * kLanes + k % kLanes; }
  static VecF Load(const uint8_t* row, int64_t k) { return Format::Load(row, k * kRowGroupRows); }
  static float Scalar(const uint8_t* row, int64_t k) { return Format::Scalar(row, Element(k)); }
};

// Rearranges a row-major F16 or BF16 matrix (HoldsInRowGroups) into groups, `grouped` holding
// as many bytes.
void PackRowGroups(const uint8_t* row_major, int64_t rows, int64_t cols, uint8_t* grouped);

// Row `row` of a grouped F16 or BF16 matrix, in f32, into out[0 .. cols) (embedding lookups).
void RowGroupsRowToF32(const uint8_t* grouped, DType dtype, int64_t cols, int64_t row, float* out);

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_ROW_GROUPS_H_
