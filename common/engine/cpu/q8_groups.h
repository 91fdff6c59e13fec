// How the CPU backend holds a Q8_0 matrix (dtype.h) in memory: its rows interleaved in groups of
// 16, so that one 64-byte load brings 4 consecutive weights of 16 rows.
//
// Why: a VNNI instruction multiplies 64 byte pairs and sums each group of 4 into one of 16
// int32 lanes. With a row's weights along the register (the file's layout), the 16 lanes are
// 16 parts of one row's sum, and every lane of every step needs its own conversion to f32 and
// its own multiply by the two block scales. With one row per lane, the 4 activations broadcast
// to all lanes, a block's 8 steps accumulate exactly in int32, and the conversion and scaling
// happen once per block for 16 rows: about a third of the vector arithmetic, so multi-token
// forwards stop being bound by it (matmul_q8.cc).
//
// Group g holds rows 16g .. 16g + 15 (the last group padded with zero rows) in the bytes of 16
// file rows, 34 bytes per 32 weights as in the file:
//   scales: for each block b, the 16 rows' IEEE-half scales (32 bytes per block);
//   values: for each block b and quad q (weights 4q .. 4q + 3 of the block), the 16 rows' 4
//           int8 values, each stored plus kQ8ValueOffset as a byte (64 bytes per quad).
// The values start 64-byte aligned when the number of blocks per row is even.
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_Q8_GROUPS_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_Q8_GROUPS_H_

#include <cstddef>
#include <cstdint>

#include "common/engine/dtype.h"

// Which int8 kernel a build has (matmul_q8.cc): AVX-512 VNNI, AVX2, or neither (portable). The
// stored values below depend on it.
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define SPLITSPEC_Q8_AVX512_VNNI 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define SPLITSPEC_Q8_AVX2 1
#endif

namespace splitspec::engine::cpu {

constexpr int kQ8GroupRows = 16;  // rows per group: the int32 lanes of an AVX-512 register
constexpr int kQ8Quad = 4;        // consecutive weights of a row stored together
constexpr int kQ8BlockQuads = kQ8BlockSize / kQ8Quad;
constexpr int kQ8QuadBytes = kQ8GroupRows * kQ8Quad;  // one quad of a block for the whole group
// Stored byte = value + kQ8ValueOffset (mod 256). VNNI multiplies unsigned by signed bytes, so
// its builds store the values plus 128. The AVX2 kernel moves the activations' signs onto the
// weights, which wants them signed: there they are stored as they are, which saves flipping every
// 32 bytes loaded (4-8% of int8 decode's matmuls on Zen 3, in a slow stretch of the machine).
// The portable kernel reads either.
#if defined(SPLITSPEC_Q8_AVX2)
constexpr int kQ8ValueOffset = 0;
#else
constexpr int kQ8ValueOffset = 128;
#endif

// A stored byte's int8 value.
inline int StoredQ8Value(uint8_t stored) {
  return static_cast<int8_t>(static_cast<uint8_t>(stored - kQ8ValueOffset));
}

inline int64_t Q8GroupCount(int64_t rows) { return (rows + kQ8GroupRows - 1) / kQ8GroupRows; }
inline size_t Q8GroupBytes(int64_t cols) { return kQ8GroupRows * DTypeRowBytes(DType::kQ8_0, cols); }
// Bytes of a whole matrix of `rows` x `cols` in groups (padding included).
inline size_t Q8GroupedBytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(Q8GroupCount(rows)) * Q8GroupBytes(cols);
}

// Group g's block scales (n_blocks x 16 halves) and values (n_blocks x 8 quads x 64 bytes).
inline const uint16_t* Q8GroupScales(const uint8_t* group) { return reinterpret_cast<const uint16_t*>(group); }
inline const uint8_t* Q8GroupValues(const uint8_t* group, int64_t cols) {
  return group + (cols / kQ8BlockSize) * kQ8GroupRows * 2;
}

// Rearranges a Q8_0 matrix in the file's row layout into groups (`grouped` holds
// Q8GroupedBytes(rows, cols) bytes; padding rows get scale 0 and value 0).
void PackQ8Groups(const uint8_t* row_major, int64_t rows, int64_t cols, uint8_t* grouped);

// Row `row` of a grouped matrix, dequantized (each weight value x its block's scale) into
// out[0 .. cols), for embedding lookups.
void Q8GroupedRow(const uint8_t* grouped, int64_t cols, int64_t row, float* out);

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_Q8_GROUPS_H_
