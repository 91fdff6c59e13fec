// exp over a row of floats, vectorized: the softmax of attention.
//
// Why not std::exp: one call per score (per key position, query head and layer) was a third of
// a long context's attention on the CPU, each call through the PLT and each spilling the vector
// registers around it.
//
// How: exp(x) = 2^n e^r with n = round(x log2 e) and r = x - n ln 2, where n ln 2 is taken off in
// two parts (ln 2 split so that the first part times n is exact: Cody and Waite's reduction),
// and e^r on |r| <= ln(2) / 2 is 1 + r + r^2 P(r) with P of degree 5 (the minimax coefficients
// published with the Cephes library's expf). Within 2 ulp of exp for results above FLT_MIN
// (tests/unit/engine/vector_exp_test.cc measures it on every path). Below that the AVX-512
// path scales into the subnormals as IEEE does, the AVX2 path returns 0; exp(0) is exactly 1,
// a NaN stays NaN, -inf gives 0, and above ~88.7 the result is inf.
//
// Determinism: every element goes through the same instruction sequence, a row's tail through
// the same vector code on a padded copy, so a result depends only on its input (attention's
// batch invariance, kernels.h). Different paths (AVX-512, AVX2, portable std::exp) may differ in
// the last bits, as the f32 dot products of different widths already do.
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_VECTOR_EXP_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_VECTOR_EXP_H_

#include <cmath>
#include <cstddef>
#include <initializer_list>

#include "common/engine/cpu/simd.h"

namespace splitspec::engine::cpu {
namespace vector_exp_internal {

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;  // few significant bits: n * kLn2Hi is exact
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
constexpr float kOverflowAbove = 88.7228394f;  // exp(x) > FLT_MAX
constexpr float kSubnormalBelow = -87.3365479f;  // exp(x) < FLT_MIN

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
// e^r for r = x - n ln 2 (n = x log2 e rounded), the part every vector path shares: ln 2 taken
// off in two fused steps (negating the constant is exact), then 1 + r + r^2 P(r) by Horner.
inline VecF ExpOfReduced(VecF x, VecF n) {
  VecF r = Fma(n, Broadcast(-kLn2Hi), x);
  r = Fma(n, Broadcast(-kLn2Lo), r);
  VecF p = Broadcast(kP0);
  for (float c : {kP1, kP2, kP3, kP4, kP5}) p = Fma(p, r, Broadcast(c));
  return Add(Fma(Mul(r, r), p, r), Broadcast(1.0f));
}
#endif

}  // namespace vector_exp_internal

#if defined(__AVX512F__)

inline __m512 ExpVector(__m512 x) {
  using namespace vector_exp_internal;
  // max/min return their second operand when either is NaN: the NaN goes through.
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // below: exp rounds to 0 in f32
  x = _mm512_min_ps(_mm512_set1_ps(kOverflowAbove + 1.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_scalef_ps(ExpOfReduced(x, n), n);  // times 2^n, into the subnormals and to inf as IEEE does
}

// x[i] = exp(x[i] - shift) for i < n.
inline void ExpInPlace(float* x, size_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, ExpVector(_mm512_sub_ps(_mm512_loadu_ps(x + i), s)));
  if (i < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(x + i, tail, ExpVector(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + i), s)));
  }
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

inline __m256 ExpVector(__m256 x) {
  using namespace vector_exp_internal;
  // Results below FLT_MIN are 0: 2^n is built in the exponent field, which holds normals only.
  const __m256 underflows = _mm256_cmp_ps(x, _mm256_set1_ps(kSubnormalBelow), _CMP_LT_OQ);
  x = _mm256_max_ps(_mm256_set1_ps(kSubnormalBelow), x);  // NaN goes through (second operand)
  x = _mm256_min_ps(_mm256_set1_ps(kOverflowAbove + 1.0f), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 e_r = ExpOfReduced(x, n);
  // 2^n for n in [-126, 129]: the biased exponent in place. n = 128 (exp still finite when
  // e^r < 1) is taken as 2^127 * 2; n = 129 puts 255 in the field, inf, as exp is there.
  const __m256i n_int = _mm256_cvtps_epi32(n);
  const __m256i above_127 = _mm256_cmpgt_epi32(n_int, _mm256_set1_epi32(127));
  const __m256i n_field = _mm256_sub_epi32(n_int, _mm256_and_si256(above_127, _mm256_set1_epi32(1)));
  const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n_field, _mm256_set1_epi32(127)), 23));
  __m256 y = _mm256_mul_ps(e_r, scale);
  y = _mm256_blendv_ps(y, _mm256_add_ps(y, y), _mm256_castsi256_ps(above_127));
  return _mm256_andnot_ps(underflows, y);
}

// x[i] = exp(x[i] - shift) for i < n.
inline void ExpInPlace(float* x, size_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, ExpVector(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
  if (i < n) {
    float tail[8] = {};
    for (size_t j = i; j < n; ++j) tail[j - i] = x[j];
    _mm256_storeu_ps(tail, ExpVector(_mm256_sub_ps(_mm256_loadu_ps(tail), s)));
    for (size_t j = i; j < n; ++j) x[j] = tail[j - i];
  }
}

#else  // portable: the C library's exp, element by element

inline void ExpInPlace(float* x, size_t n, float shift) {
  for (size_t i = 0; i < n; ++i) x[i] = std::exp(x[i] - shift);
}

#endif

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_VECTOR_EXP_H_
