// The few vector operations the CPU kernels use, for AVX-512, AVX2 and a portable fallback.
// Weights are widened to f32 at load (F16 via F16C, BF16 by a 16-bit shift), so every kernel
// computes in f32 whatever the storage dtype.
//
// Determinism: a dot product is one accumulator vector walking K in order, then ReduceAdd
// (a fixed instruction sequence), then the scalar tail in order. The result of any element
// therefore depends only on its two input rows, never on batching or threading.
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_SIMD_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_SIMD_H_

#include <cstdint>
#include <cstring>

#include "common/engine/dtype.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#include <immintrin.h>
#endif

namespace splitspec::engine::cpu {

#if defined(__AVX512F__)

constexpr int kLanes = 16;
using VecF = __m512;
inline VecF Zero() { return _mm512_setzero_ps(); }
inline VecF Broadcast(float x) { return _mm512_set1_ps(x); }
inline VecF Load(const float* p) { return _mm512_loadu_ps(p); }
inline VecF LoadF16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline VecF LoadBF16(const uint16_t* p) {
  const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}
inline void Store(float* p, VecF v) { _mm512_storeu_ps(p, v); }
// Rounds to the nearest half, ties to even: F32ToF16 (dtype.h) lane by lane (a NaN stays a NaN).
inline void StoreF16(uint16_t* p, VecF v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline VecF Fma(VecF a, VecF b, VecF c) { return _mm512_fmadd_ps(a, b, c); }
inline VecF Mul(VecF a, VecF b) { return _mm512_mul_ps(a, b); }
inline VecF Add(VecF a, VecF b) { return _mm512_add_ps(a, b); }
// Halves added pairwise down to one lane: 256 + 256 bits, 128 + 128, lanes {0,1} + {2,3}, then
// lane 0 + lane 1 (what GCC's _mm512_reduce_add_ps does, spelled out so that every compiler adds
// the same pairs, and so that ReduceAddLanes below can take 16 sums at once with the same additions).
inline float ReduceAdd(VecF v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_permute_ps(s4, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The horizontal sums of kLanes (16) vectors at once, lane p of the result being ReduceAdd(v[p])
// to the bit: each level adds the same pairs ReduceAdd adds for one vector, two, four, eight
// vectors' worth per instruction. (Attention's scores: a position's score must not depend on
// where in its row it sits, since a tree node sees its ancestors at other indices than the
// chain does.)
inline __m512 ReduceAddLanes(const __m512 v[16]) {
  __m512 halves[8], quarters[4], pairs[2];
  for (int m = 0; m < 8; ++m) {  // 256 + 256 bits: vectors 2m and 2m+1 side by side
    halves[m] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * m], v[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(v[2 * m], v[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int j = 0; j < 4; ++j) {  // 128 + 128: one vector per 128-bit lane, 4j .. 4j+3
    quarters[j] = _mm512_add_ps(_mm512_shuffle_f32x4(halves[2 * j], halves[2 * j + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm512_shuffle_f32x4(halves[2 * j], halves[2 * j + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  for (int i = 0; i < 2; ++i) {  // lanes {0,1} + {2,3}: lane c of 8i+c in 0-1, of 8i+4+c in 2-3
    pairs[i] = _mm512_add_ps(_mm512_shuffle_ps(quarters[2 * i], quarters[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(quarters[2 * i], quarters[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // lane 0 + lane 1: 128-bit lane c then holds vectors c, 4+c, 8+c, 12+c; back into order.
  const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(pairs[0], pairs[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_ps(pairs[0], pairs[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, sums);
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

constexpr int kLanes = 8;
using VecF = __m256;
inline VecF Zero() { return _mm256_setzero_ps(); }
inline VecF Broadcast(float x) { return _mm256_set1_ps(x); }
inline VecF Load(const float* p) { return _mm256_loadu_ps(p); }
inline VecF LoadF16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline VecF LoadBF16(const uint16_t* p) {
  const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
}
inline void Store(float* p, VecF v) { _mm256_storeu_ps(p, v); }
inline void StoreF16(uint16_t* p, VecF v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline VecF Fma(VecF a, VecF b, VecF c) { return _mm256_fmadd_ps(a, b, c); }
inline VecF Mul(VecF a, VecF b) { return _mm256_mul_ps(a, b); }
inline VecF Add(VecF a, VecF b) { return _mm256_add_ps(a, b); }
inline float ReduceAdd(VecF v) {
  const __m128 sum4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 sum2 = _mm_add_ps(sum4, _mm_movehl_ps(sum4, sum4));
  return _mm_cvtss_f32(_mm_add_ss(sum2, _mm_movehdup_ps(sum2)));
}

// The horizontal sums of kLanes (8) vectors at once, lane p of the result being ReduceAdd(v[p])
// to the bit (see the AVX-512 version): lanes i + i + 4 for two vectors an instruction, then
// lanes {0,1} + {2,3} and lane 0 + lane 1 for four.
inline __m256 ReduceAddLanes(const __m256 v[8]) {
  __m256 halves[4], quarters[2];
  for (int m = 0; m < 4; ++m) {  // 128 + 128 bits: vector 2m's sums in the low half, 2m+1's in the high
    halves[m] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * m], v[2 * m + 1], 0x20),
                              _mm256_permute2f128_ps(v[2 * m], v[2 * m + 1], 0x31));
  }
  for (int j = 0; j < 2; ++j) {  // lanes {0,1} + {2,3}: 4j and 4j+2 in the low half, 4j+1 and 4j+3 high
    quarters[j] = _mm256_add_ps(_mm256_shuffle_ps(halves[2 * j], halves[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                                _mm256_shuffle_ps(halves[2 * j], halves[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // lane 0 + lane 1: the low half then holds vectors 0, 2, 4, 6 and the high 1, 3, 5, 7.
  const __m256 sums = _mm256_add_ps(_mm256_shuffle_ps(quarters[0], quarters[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm256_shuffle_ps(quarters[0], quarters[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(sums, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

#else  // portable fallback: the same algorithm on 8 scalar lanes

constexpr int kLanes = 8;
struct VecF {
  float lane[kLanes];
};
inline VecF Zero() { return VecF{}; }
inline VecF Broadcast(float x) {
  VecF v;
  for (float& l : v.lane) l = x;
  return v;
}
inline VecF Load(const float* p) {
  VecF v;
  for (int i = 0; i < kLanes; ++i) v.lane[i] = p[i];
  return v;
}
inline VecF LoadF16(const uint16_t* p) {
  VecF v;
  for (int i = 0; i < kLanes; ++i) v.lane[i] = F16ToF32(p[i]);
  return v;
}
inline VecF LoadBF16(const uint16_t* p) {
  VecF v;
  for (int i = 0; i < kLanes; ++i) v.lane[i] = BF16ToF32(p[i]);
  return v;
}
inline void Store(float* p, VecF v) {
  for (int i = 0; i < kLanes; ++i) p[i] = v.lane[i];
}
inline void StoreF16(uint16_t* p, VecF v) {
  for (int i = 0; i < kLanes; ++i) p[i] = F32ToF16(v.lane[i]);
}
inline VecF Fma(VecF a, VecF b, VecF c) {
  for (int i = 0; i < kLanes; ++i) c.lane[i] += a.lane[i] * b.lane[i];
  return c;
}
inline VecF Mul(VecF a, VecF b) {
  for (int i = 0; i < kLanes; ++i) a.lane[i] *= b.lane[i];
  return a;
}
inline VecF Add(VecF a, VecF b) {
  for (int i = 0; i < kLanes; ++i) a.lane[i] += b.lane[i];
  return a;
}
inline float ReduceAdd(VecF v) {
  float sum = 0;
  for (float l : v.lane) sum += l;
  return sum;
}
// Lane p: ReduceAdd(v[p]).
inline VecF ReduceAddLanes(const VecF v[kLanes]) {
  VecF sums;
  for (int p = 0; p < kLanes; ++p) sums.lane[p] = ReduceAdd(v[p]);
  return sums;
}

#endif

// One IEEE half (a Q8_0 block scale) to f32: F16C's single conversion where present.
inline float HalfToF32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return F16ToF32(h);
#endif
}

// Asks for the cache line holding `p` to be brought into L2 (prefetcht1 on x86); no effect on
// results. Used where access streams are too short for the hardware prefetchers to ramp up.
inline void PrefetchToL2(const void* p) { __builtin_prefetch(p, /*rw=*/0, /*locality=*/2); }
// The same into L1 (prefetcht0), for lines the next few hundred bytes of a stream will read.
inline void PrefetchToL1(const void* p) { __builtin_prefetch(p, /*rw=*/0, /*locality=*/3); }
// The same as a non-temporal line (prefetchnta): for a stream read once, as decode reads its
// weights.
inline void PrefetchNonTemporal(const void* p) { __builtin_prefetch(p, /*rw=*/0, /*locality=*/0); }

// The weight storage formats as compile-time types, so a kernel's inner loop has no dtype
// branch. A row is addressed by its first byte; Load widens kLanes weights starting at element k
// (a multiple of kLanes) to f32, Scalar one weight. kVectorBytes: bytes behind one Load.
struct F32Weights {
  static constexpr int kVectorBytes = kLanes * 4;
  static VecF Load(const uint8_t* row, int64_t k) { return cpu::Load(reinterpret_cast<const float*>(row) + k); }
  static float Scalar(const uint8_t* row, int64_t k) { return reinterpret_cast<const float*>(row)[k]; }
};
struct F16Weights {
  static constexpr int kVectorBytes = kLanes * 2;
  static VecF Load(const uint8_t* row, int64_t k) { return LoadF16(reinterpret_cast<const uint16_t*>(row) + k); }
  static float Scalar(const uint8_t* row, int64_t k) { return F16ToF32(reinterpret_cast<const uint16_t*>(row)[k]); }
};
struct BF16Weights {
  static constexpr int kVectorBytes = kLanes * 2;
  static VecF Load(const uint8_t* row, int64_t k) { return LoadBF16(reinterpret_cast<const uint16_t*>(row) + k); }
  static float Scalar(const uint8_t* row, int64_t k) { return BF16ToF32(reinterpret_cast<const uint16_t*>(row)[k]); }
};
// Element i of a weight row in F32, F16 or BF16, for embedding lookups.
inline float LoadScalar(const void* row, int64_t i, DType dtype) {
  const auto* bytes = static_cast<const uint8_t*>(row);
  switch (dtype) {
    case DType::kF32: return F32Weights::Scalar(bytes, i);
    case DType::kF16: return F16Weights::Scalar(bytes, i);
    case DType::kBF16: return BF16Weights::Scalar(bytes, i);
    case DType::kQ8_0: break;  // held in groups of rows, not rows: Q8GroupedRow (q8_groups.h)
  }
  return 0;
}

// Fixed-order dot product of two f32 vectors of length n.
inline float Dot(const float* a, const float* b, int n) {
  VecF acc = Zero();
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = Fma(Load(a + i), Load(b + i), acc);
  float sum = ReduceAdd(acc);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_SIMD_H_
