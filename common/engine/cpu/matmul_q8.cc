// Q8_0 weights (dtype.h), held in groups of 16 rows (q8_groups.h), times activations quantized
// the same way, for the CPU backend.
//
// Why quantize the activations: widening each int8 weight to f32 and multiplying it by its
// block scale costs about four vector instructions per 16 weights, which made int8 decode
// compute-bound at less than half the machine's read bandwidth. With both sides in int8 a VNNI
// instruction multiplies 64 pairs; with the weights in groups, its 16 int32 lanes are 16 rows,
// the 4 activations of a quad are broadcast to all of them, and a block's 8 quads sum exactly in
// int32 before one conversion and one scaling per block for 16 rows.
//
// The arithmetic, the same on every path and in every build: a token's row of K activations is
// quantized per block of 32 (d = max|x| / 127, q = round-half-even(x / d)); a block's sum of
// q_w * q_x is an exact integer s; the output starts at 0 and, block by block in order, becomes
// fma(f32(s), d_w * d_x, output) (the product of the scales rounded to f32 first), then the
// bias is added. Integer sums are exact however they are formed, so the AVX-512 VNNI, AVX2 and
// portable kernels give the same bits, and a result depends only on its weight row and its
// token's row: batching, tiling and threading never change it (the contract of backend.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/engine/cpu/kernels.h"
#include "common/engine/cpu/matmul_parts.h"
#include "common/engine/cpu/q8_groups.h"
#include "common/engine/cpu/simd.h"
#include "common/engine/dtype.h"

namespace splitspec::engine::cpu {
namespace {

constexpr int64_t kTokenTile = 128;  // tokens quantized at a time: bounded scratch for long prefills

#if defined(SPLITSPEC_Q8_AVX512_VNNI)
constexpr int kTokenBlock = 8;  // 16 accumulators of 32 registers
#elif defined(SPLITSPEC_Q8_AVX2)
// 4 tokens: 8 block sums, 2 weight halves, a token's broadcast quad, its absolute values and the
// ones of 16 registers, the outputs in memory (GroupTile). Three tokens a tile with the outputs in
// registers (12 of them) spilled. Zen 3, the medium model's int8 matrices in turn (87 MB), 2
// threads, the two alternating in one process (a harness not kept), medians: 4 tokens 8.00 /
// 8.16 -> 7.04 / 7.62 ms, 5 tokens 8.40 / 9.08 -> 7.71 / 8.06, 8 tokens 17.83 / 12.19 -> 16.03
// / 11.12, 16 tokens level (29.09 / 19.77 -> 28.60 / 19.73); 5 a tile measured the same as 4.
constexpr int kTokenBlock = 4;
#else
constexpr int kTokenBlock = 4;
#endif

// One block of 32 activations to int8: scale d = max|x| / 127, values round-half-even(x * 127 /
// max|x|), and -kQ8ValueOffset x their sum (see QuantizedTokens). A block holding an inf or NaN
// gets a NaN scale, values 0 and offset 0, so its products are NaN, as the F32 kernels would
// give (rounding a NaN to int8 would be undefined).
inline void NonFiniteBlock(int8_t* q, float* scale, int32_t* offset) {
  std::memset(q, 0, kQ8BlockSize);
  *scale = std::numeric_limits<float>::quiet_NaN();
  *offset = 0;
}

#if defined(SPLITSPEC_Q8_AVX512_VNNI)
// The same as the portable version below, 32 lanes at once: max is exact in any order, the
// multiply is the same f32 multiply, and the conversion rounds half to even, as nearbyint does
// in the default rounding mode, which nothing here changes.
inline void QuantizeBlock(const float* x, int8_t* q, float* scale, int32_t* offset) {
  const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
  const __m512 abs0 = _mm512_abs_ps(x0), abs1 = _mm512_abs_ps(x1);
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  // Not below inf: an inf, or a NaN (unordered).
  if ((_mm512_cmp_ps_mask(abs0, inf, _CMP_NLT_UQ) | _mm512_cmp_ps_mask(abs1, inf, _CMP_NLT_UQ)) != 0) {
    NonFiniteBlock(q, scale, offset);
    return;
  }
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(abs0, abs1));
  *scale = amax / 127.0f;
  const __m512 inverse = _mm512_set1_ps(amax == 0.0f ? 0.0f : 127.0f / amax);
  const __m512i low = _mm512_set1_epi32(-127), high = _mm512_set1_epi32(127);
  const __m512i q0 = _mm512_max_epi32(low, _mm512_min_epi32(high, _mm512_cvtps_epi32(_mm512_mul_ps(x0, inverse))));
  const __m512i q1 = _mm512_max_epi32(low, _mm512_min_epi32(high, _mm512_cvtps_epi32(_mm512_mul_ps(x1, inverse))));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtepi32_epi8(q1));
  *offset = -kQ8ValueOffset * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
}
#elif defined(__AVX2__)
// The same with AVX2, 8 lanes at a time (same argument: exact max, same multiply, rounding
// half to even).
inline void QuantizeBlock(const float* x, int8_t* q, float* scale, int32_t* offset) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256 v[4], abs[4];
  int not_finite = 0;
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    abs[i] = _mm256_andnot_ps(sign, v[i]);
    not_finite |= _mm256_movemask_ps(_mm256_cmp_ps(abs[i], inf, _CMP_NLT_UQ));  // inf or NaN
  }
  if (not_finite != 0) {
    NonFiniteBlock(q, scale, offset);
    return;
  }
  __m256 m = _mm256_max_ps(_mm256_max_ps(abs[0], abs[1]), _mm256_max_ps(abs[2], abs[3]));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  *scale = amax / 127.0f;
  const __m256 inverse = _mm256_set1_ps(amax == 0.0f ? 0.0f : 127.0f / amax);
  const __m256i low = _mm256_set1_epi32(-127), high = _mm256_set1_epi32(127);
  __m256i qi[4];
  for (int i = 0; i < 4; ++i) {
    qi[i] = _mm256_max_epi32(low, _mm256_min_epi32(high, _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inverse))));
  }
  // The packs interleave 128-bit lanes; the permute puts the 32 values back in order.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  __m256i sum = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
  *offset = -kQ8ValueOffset * _mm_cvtsi128_si32(s4);
}
#else
inline void QuantizeBlock(const float* x, int8_t* q, float* scale, int32_t* offset) {
  float amax = 0;
  bool finite = true;
  for (int i = 0; i < kQ8BlockSize; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    finite = finite && std::isfinite(x[i]);  // std::max would drop a NaN
  }
  if (!finite) {
    NonFiniteBlock(q, scale, offset);
    return;
  }
  *scale = amax / 127.0f;
  const float inverse = amax == 0.0f ? 0.0f : 127.0f / amax;
  int32_t sum = 0;
  for (int i = 0; i < kQ8BlockSize; ++i) {
    // |x| * 127 / amax <= 127 up to rounding, which nearbyint cannot carry past 127.
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inverse), -127.0f, 127.0f));
    sum += q[i];
  }
  *offset = -kQ8ValueOffset * sum;
}
#endif

// Activations of up to kTokenTile tokens in the kernels' form: int8 values, and per block the
// scale and -kQ8ValueOffset x the sum of the block's values (what the VNNI path's unsigned
// weights add, negated: its block sums start from it; 0 where the weights are stored signed).
class QuantizedTokens {
 public:
  void Quantize(const std::vector<const float*>& x_rows, int64_t t0, int64_t t1, int64_t n_in) {
    n_in_ = n_in;
    const int64_t n = t1 - t0, n_blocks = n_in / kQ8BlockSize;
    // Every element is written by QuantizeBlock: resize, not assign.
    values_.resize(static_cast<size_t>(n * n_in));
    scales_.resize(static_cast<size_t>(n * n_blocks));
    offsets_.resize(static_cast<size_t>(n * n_blocks));
    for (int64_t t = 0; t < n; ++t) QuantizeRow(x_rows[t0 + t], t);
  }
  const int8_t* values(int64_t t) const { return values_.data() + t * n_in_; }
  const float* scales(int64_t t) const { return scales_.data() + t * (n_in_ / kQ8BlockSize); }
  const int32_t* offsets(int64_t t) const { return offsets_.data() + t * (n_in_ / kQ8BlockSize); }

 private:
  // Quantizes block by block (QuantizeBlock).
  void QuantizeRow(const float* x, int64_t t) {
    const int64_t n_blocks = n_in_ / kQ8BlockSize;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const size_t at = static_cast<size_t>(t * n_blocks + b);
      QuantizeBlock(x + b * kQ8BlockSize, values_.data() + t * n_in_ + b * kQ8BlockSize, &scales_[at], &offsets_[at]);
    }
  }

  int64_t n_in_ = 0;
  std::vector<int8_t> values_;
  std::vector<float> scales_;
  std::vector<int32_t> offsets_;
};

// Quad q of a token's values as one int32 (4 bytes), for a broadcast to every lane.
inline int32_t Quad(const int8_t* values, int64_t q) {
  int32_t v;
  std::memcpy(&v, values + q * kQ8Quad, sizeof v);
  return v;
}

#if defined(SPLITSPEC_Q8_AVX512_VNNI)

// out[j][lane] for the 16 rows of a group and TB tokens from t. VNNI multiplies unsigned by
// signed bytes: the stored weights are value + 128, so each block sum starts from -128 x the
// token's block sum, which takes that back. A chain of 8 dependent multiply-adds per block would
// leave decode (one token) waiting on their latency, so few tokens split the quads over two
// accumulators (exact integers: the sum is the same).
template <int TB>
void GroupTile(const uint8_t* group, int64_t n_in, const QuantizedTokens& x, int64_t t, const StepPrefetch& prefetch,
               float out[TB][kQ8GroupRows]) {
  constexpr int kSplit = TB <= 2 ? 2 : 1;
  const int64_t n_blocks = n_in / kQ8BlockSize;
  const uint16_t* scales = Q8GroupScales(group);
  const uint8_t* values = Q8GroupValues(group, n_in);
  __m512 acc[TB];
  for (int j = 0; j < TB; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    prefetch.Step(b);
    __m512i sums[TB][kSplit];
    for (int j = 0; j < TB; ++j) {
      sums[j][0] = _mm512_set1_epi32(x.offsets(t + j)[b]);
      for (int s = 1; s < kSplit; ++s) sums[j][s] = _mm512_setzero_si512();
    }
    for (int q = 0; q < kQ8BlockQuads; ++q) {
      const __m512i w = _mm512_loadu_si512(values + (b * kQ8BlockQuads + q) * kQ8QuadBytes);
      for (int j = 0; j < TB; ++j) {
        const __m512i xq = _mm512_set1_epi32(Quad(x.values(t + j), b * kQ8BlockQuads + q));
        sums[j][q % kSplit] = _mm512_dpbusd_epi32(sums[j][q % kSplit], w, xq);
      }
    }
    const __m512 w_scale =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + b * kQ8GroupRows)));
    for (int j = 0; j < TB; ++j) {
      __m512i sum = sums[j][0];
      for (int s = 1; s < kSplit; ++s) sum = _mm512_add_epi32(sum, sums[j][s]);
      const __m512 scale = _mm512_mul_ps(w_scale, _mm512_set1_ps(x.scales(t + j)[b]));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), scale, acc[j]);
    }
  }
  for (int j = 0; j < TB; ++j) _mm512_storeu_ps(out[j], acc[j]);
}

#elif defined(SPLITSPEC_Q8_AVX2)

// maddubs multiplies unsigned by signed bytes, so the token's signs move onto the weights, stored
// signed in these builds (q8_groups.h): |x| * sign(x) w. Pairs then sum without saturation
// because |q| <= 127, and a multiply-add by 1 sums each quad. The two tiles below share these
// steps.
static_assert(kQ8ValueOffset == 0);

// One quad (64 bytes: 4 weights of 16 rows), its two halves of 8 rows.
inline void LoadQuad(const uint8_t* quad, __m256i w[2]) {
  for (int h = 0; h < 2; ++h) w[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad + 32 * h));
}

// sums[h] += the quad's 4 products for each of half h's 8 rows, for the token quad xq (its 4
// values broadcast) with absolute values x_abs.
inline void AddQuadProducts(const __m256i w[2], __m256i xq, __m256i x_abs, __m256i sums[2]) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int h = 0; h < 2; ++h) {
    const __m256i pairs = _mm256_maddubs_epi16(x_abs, _mm256_sign_epi8(w[h], xq));
    sums[h] = _mm256_add_epi32(sums[h], _mm256_madd_epi16(pairs, ones));
  }
}

// The 16 rows' weight scales of block b, as two halves of 8 lanes.
inline void LoadBlockScales(const uint8_t* group, int64_t b, __m256 w_scale[2]) {
  const uint16_t* scales = Q8GroupScales(group) + b * kQ8GroupRows;
  for (int h = 0; h < 2; ++h) {
    w_scale[h] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 8 * h)));
  }
}

// acc[h] = fma(f32(sums[h]), w_scale[h] * x_scale, acc[h]): a block's exact sums scaled into
// the outputs, in block order.
inline void AddScaledBlock(const __m256i sums[2], const __m256 w_scale[2], float x_scale, __m256 acc[2]) {
  for (int h = 0; h < 2; ++h) {
    const __m256 scale = _mm256_mul_ps(w_scale[h], _mm256_set1_ps(x_scale));
    acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[h]), scale, acc[h]);
  }
}

// Token quad q of a token's values, broadcast to every lane, and its absolute values.
inline void BroadcastQuad(const int8_t* values, int64_t q, __m256i* xq, __m256i* x_abs) {
  *xq = _mm256_set1_epi32(Quad(values, q));
  *x_abs = _mm256_abs_epi8(*xq);
}

inline void StoreHalves(const __m256 acc[2], float out[kQ8GroupRows]) {
  _mm256_storeu_ps(out, acc[0]);
  _mm256_storeu_ps(out + 8, acc[1]);
}

// out[j][lane] for the 16 rows of a group (two halves of 8 lanes) and TB tokens from t: each
// quad loaded once for the TB tokens. The outputs accumulate in out[], as in GroupStreamsTile
// below, which leaves the registers to the TB x 2 block sums.
template <int TB>
void GroupTile(const uint8_t* group, int64_t n_in, const QuantizedTokens& x, int64_t t, const StepPrefetch& prefetch,
               float out[TB][kQ8GroupRows]) {
  const int64_t n_blocks = n_in / kQ8BlockSize;
  const uint8_t* values = Q8GroupValues(group, n_in);
  for (int j = 0; j < TB; ++j) std::fill(out[j], out[j] + kQ8GroupRows, 0.0f);
  for (int64_t b = 0; b < n_blocks; ++b) {
    prefetch.Step(b);
    __m256i sums[TB][2];
    for (int j = 0; j < TB; ++j) sums[j][0] = sums[j][1] = _mm256_setzero_si256();
    for (int q = 0; q < kQ8BlockQuads; ++q) {
      __m256i w[2];
      LoadQuad(values + (b * kQ8BlockQuads + q) * kQ8QuadBytes, w);
      for (int j = 0; j < TB; ++j) {
        __m256i xq, x_abs;
        BroadcastQuad(x.values(t + j), b * kQ8BlockQuads + q, &xq, &x_abs);
        AddQuadProducts(w, xq, x_abs, sums[j]);
      }
    }
    __m256 w_scale[2];
    LoadBlockScales(group, b, w_scale);
    for (int j = 0; j < TB; ++j) {
      __m256 acc[2] = {_mm256_loadu_ps(out[j]), _mm256_loadu_ps(out[j] + 8)};
      AddScaledBlock(sums[j], w_scale, x.scales(t + j)[b], acc);
      StoreHalves(acc, out[j]);
    }
  }
}

// How far ahead decode's streams prefetch each group's values and its scales (read as prefetches
// into L1, which never fault, so they may run past a group's or W's end). A group's scales are
// a second stream beside its values that moves 16 times slower, one line every two blocks,
// and the hardware prefetchers leave it to demand misses; its values alone they follow, but
// not far enough ahead for four of them a thread. Zen 3, 2 threads, the medium model's
// matrices in turn (87 MB), alternating runs, medians: no prefetch 7.37 / 7.68 ms; the scales
// 8 blocks ahead 7.26 / 6.97; with the values too, 4 / 8 / 12 / 16 / 24 quads ahead
// 6.02 / 5.68 / 5.78 / 6.08 / 6.00 ms (second round 5.72 / 5.61 / 5.74 / 5.70 / 6.32). Those
// were minutes when the machine's memory answered slowly; in faster ones (the whole decode's
// matmuls in 4.1-5.4 ms without the prefetch) it measured level: it costs nothing there.
constexpr int64_t kValuePrefetchQuads = 8;  // one block: 512 bytes
constexpr int64_t kScalePrefetchBlocks = 8;  // 256 bytes, four lines

// One token against S groups at once, out[s] for groups[s]: GroupTile<1>'s arithmetic for each
// group, the groups interleaved (see DecodeGroups for why), the token's broadcast quad shared
// by the S groups. Each group's sums, scaling and order are GroupTile<1>'s: the same bits.
// The outputs accumulate in out[] itself, loaded and stored once a block: held in registers,
// S x 2 of them beside the S x 2 block sums left too few of AVX2's 16, and the compiler spilled
// block sums instead, a store and a reload on their chains every quad. Zen 3, the medium
// model's int8 matrices in turn, one token, 2 threads, the two alternating in one process (a
// harness not kept), medians of three runs: all 87 MB 5.34 / 5.20 / 6.54 ms in registers,
// 5.18 / 5.27 / 6.09 in out[]; 6.7 MB of them ten times over (from L3, as an int8 model that
// fits there) 2.10 / 2.12 / 2.34 against 1.80 / 1.83 / 2.06 ms.
template <int S>
void GroupStreamsTile(const uint8_t* const groups[S], int64_t n_in, const QuantizedTokens& x,
                      float out[S][kQ8GroupRows]) {
  const int64_t n_blocks = n_in / kQ8BlockSize;
  const uint8_t* values[S];
  for (int s = 0; s < S; ++s) values[s] = Q8GroupValues(groups[s], n_in);
  for (int s = 0; s < S; ++s) std::fill(out[s], out[s] + kQ8GroupRows, 0.0f);
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int s = 0; s < S; ++s) PrefetchToL1(Q8GroupScales(groups[s]) + (b + kScalePrefetchBlocks) * kQ8GroupRows);
    __m256i sums[S][2];
    for (int s = 0; s < S; ++s) sums[s][0] = sums[s][1] = _mm256_setzero_si256();
    for (int q = 0; q < kQ8BlockQuads; ++q) {
      __m256i xq, x_abs;
      BroadcastQuad(x.values(0), b * kQ8BlockQuads + q, &xq, &x_abs);
      for (int s = 0; s < S; ++s) {
        const uint8_t* quad = values[s] + (b * kQ8BlockQuads + q) * kQ8QuadBytes;
        PrefetchToL1(quad + kValuePrefetchQuads * kQ8QuadBytes);
        __m256i w[2];
        LoadQuad(quad, w);
        AddQuadProducts(w, xq, x_abs, sums[s]);
      }
    }
    for (int s = 0; s < S; ++s) {
      __m256 w_scale[2];
      LoadBlockScales(groups[s], b, w_scale);
      __m256 acc[2] = {_mm256_loadu_ps(out[s]), _mm256_loadu_ps(out[s] + 8)};
      AddScaledBlock(sums[s], w_scale, x.scales(0)[b], acc);
      StoreHalves(acc, out[s]);
    }
  }
}

#else  // portable: the same arithmetic, lane by lane

template <int TB>
void GroupTile(const uint8_t* group, int64_t n_in, const QuantizedTokens& x, int64_t t, const StepPrefetch& prefetch,
               float out[TB][kQ8GroupRows]) {
  const int64_t n_blocks = n_in / kQ8BlockSize;
  const uint16_t* scales = Q8GroupScales(group);
  const uint8_t* values = Q8GroupValues(group, n_in);
  for (int j = 0; j < TB; ++j) std::fill(out[j], out[j] + kQ8GroupRows, 0.0f);
  for (int64_t b = 0; b < n_blocks; ++b) {
    prefetch.Step(b);
    for (int j = 0; j < TB; ++j) {
      const int8_t* q = x.values(t + j) + b * kQ8BlockSize;
      for (int lane = 0; lane < kQ8GroupRows; ++lane) {
        int32_t sum = 0;
        for (int i = 0; i < kQ8BlockSize; ++i) {
          const uint8_t stored = values[(b * kQ8BlockQuads + i / kQ8Quad) * kQ8QuadBytes + lane * kQ8Quad + i % kQ8Quad];
          sum += StoredQ8Value(stored) * q[i];
        }
        const float scale = HalfToF32(scales[b * kQ8GroupRows + lane]) * x.scales(t + j)[b];
        out[j][lane] = std::fma(static_cast<float>(sum), scale, out[j][lane]);
      }
    }
  }
}

#endif

// Writes a group's results for tokens [t, t + TB) where its rows belong: rows past W's end are
// padding, and a group may straddle the parts of a MatMulSplit.
template <int TB>
void StoreGroup(const float results[TB][kQ8GroupRows], int64_t row0, int64_t n_rows, absl::Span<const OutputPart> parts,
                int64_t t, const float* bias) {
  const int64_t row_end = std::min(row0 + kQ8GroupRows, n_rows);
  for (const OutputPart& part : parts) {
    const int64_t first = std::max(row0, part.first_row), end = std::min(row_end, part.first_row + part.n_cols);
    for (int j = 0; j < TB; ++j) {
      float* out = part.out + (t + j) * part.n_cols - part.first_row;
      for (int64_t row = first; row < end; ++row) out[row] = results[j][row - row0] + (bias ? bias[row] : 0.0f);
    }
  }
}

// Tokens [t_begin, t_end) (quantized in x from t_begin) against group g, TB tokens at a time,
// advancing the group's tile count `tile`; each tile asks for its share of the prefetch (the
// first tile reads the group from memory, later ones find it in cache).
template <int TB>
void TokenTiles(const uint8_t* group, int64_t n_in, int64_t row0, int64_t n_rows, absl::Span<const OutputPart> parts,
                const QuantizedTokens& x, int64_t t_begin, int64_t& t, int64_t t_end, const float* bias,
                const BlockPrefetch& prefetch, int64_t& tile) {
  for (; t + TB <= t_end; t += TB, ++tile) {
    float results[TB][kQ8GroupRows];
    GroupTile<TB>(group, n_in, x, t - t_begin, prefetch.ShareOf(tile), results);
    StoreGroup<TB>(results, row0, n_rows, parts, t, bias);
  }
}

// The remainder of fewer than kTokenBlock tokens, one tile of its exact size.
template <int TB>
void LastTokens(const uint8_t* group, int64_t n_in, int64_t row0, int64_t n_rows, absl::Span<const OutputPart> parts,
                const QuantizedTokens& x, int64_t t_begin, int64_t& t, int64_t t_end, const float* bias,
                const BlockPrefetch& prefetch, int64_t& tile) {
  if constexpr (TB > 0) {
    if (t_end - t == TB) {
      TokenTiles<TB>(group, n_in, row0, n_rows, parts, x, t_begin, t, t_end, bias, prefetch, tile);
      return;
    }
    LastTokens<TB - 1>(group, n_in, row0, n_rows, parts, x, t_begin, t, t_end, bias, prefetch, tile);
  }
}

// Where a group's tiles start prefetching (nullptr: nowhere): for one token a fixed distance
// ahead in bytes (kDecodePrefetchBytes), else kPrefetchBlocks groups ahead (RowsToPrefetch),
// shared by the group's full tiles of kTokenBlock tokens (SharedBlockPrefetch; matmul.cc's
// PrefetchBy has why). Not by a last, shorter tile: a group's step is some 9 lines, and shared
// with the one-token tile of a 9-token forward its half made that forward 25% slower at the large
// preset's shapes (first tile / shared, medians of 8, four rounds, ratio 1.253). By the full
// tiles, the same harness, ratio of the medians, four rounds each (shared faster in): large
// shapes 16 tokens 0.872 (4 of 4), 17 tokens 0.924 (4), 20 tokens 0.911 (4), 24 tokens 0.893
// (4), 32 tokens 0.865 (3), 64 tokens 0.941 (4); medium shapes 16 tokens 0.852 (4), 32 tokens
// 0.891 (4). Measured with the AVX-512 VNNI kernels; AVX2 builds share their groups' prefetch
// the same way, not measured there.
// A group of the medium model is 12.75 KB, so two groups ahead was 26 KB; one token's tile reads
// its group fast enough that a nearer window keeps more of the stream's next lines coming.
// Zen 5 (AVX-512 VNNI, 2 cores), the medium model's int8 matrices in turn with one token, the
// distances alternating pass by pass (a harness not kept), medians: two groups 1.982 / 1.948
// ms, 8 KB 1.869, 6 KB 1.894; in a faster minute two groups 1.540, 4 KB 1.508, 6 KB 1.499,
// 8 KB 1.504, 12 KB 1.515; none 2.661 against two groups' 2.249. Two or three groups read side
// by side a thread (as the AVX2 decode below, and as F16 and BF16 decode on AVX-512 read two
// rows) measured slower in slow minutes (1.825 -> 2.006 ms and 1.833 -> 2.140 with two) and
// level in fast ones (1.286 / 1.316).
constexpr size_t kDecodePrefetchBytes = 6144;
// Asked for with DecodePrefetchHint, as F32, F16 and BF16 decode ask for their rows (matmul.cc):
// non-temporal on a Zen 5, where decode steps of the medium model with int8 weights, L2 /
// non-temporal alternating step by step (a harness not kept), took (medians of 60) 2.000 /
// 1.978 ms, 2.088 / 2.035, 2.074 / 1.966, 1.660 / 1.592, and (of 40) 2.573 / 2.429, 1.926 /
// 1.752, 2.147 / 1.828, 2.900 / 2.847, 1.985 / 1.840, 2.787 / 2.794. Into L1 (prefetcht0)
// measured as non-temporal did.
static_assert(kDecodePrefetchBytes <= kMaxNonTemporalBytesAhead,
              "decode's non-temporal lines must still be in L1 when read");

BlockPrefetch GroupPrefetch(const uint8_t* w, int64_t n_in, int64_t n_groups, int64_t g, int64_t n_tokens) {
  const size_t group_bytes = Q8GroupBytes(n_in);
  const int64_t n_blocks = n_in / kQ8BlockSize;
  const size_t bytes_per_step = (group_bytes + n_blocks - 1) / n_blocks;
  if (n_tokens > 1) {
    const char* at = RowsToPrefetch(w, group_bytes, n_groups, g, 1);
    return SharedBlockPrefetch(at, bytes_per_step, n_blocks, std::max<int64_t>(1, n_tokens / kTokenBlock));
  }
  BlockPrefetch prefetch{nullptr, bytes_per_step, n_blocks, 1, DecodePrefetchHint()};
  const size_t at = static_cast<size_t>(g) * group_bytes + kDecodePrefetchBytes;
  if (at + group_bytes <= static_cast<size_t>(n_groups) * group_bytes) prefetch.at = reinterpret_cast<const char*>(w + at);
  return prefetch;
}

void Group(const uint8_t* w, int64_t n_rows, int64_t n_in, int64_t g, absl::Span<const OutputPart> parts,
           const QuantizedTokens& x, int64_t t_begin, int64_t t_end, const float* bias) {
  const uint8_t* group = w + g * Q8GroupBytes(n_in);
  const BlockPrefetch prefetch = GroupPrefetch(w, n_in, Q8GroupCount(n_rows), g, t_end - t_begin);
  const int64_t row0 = g * kQ8GroupRows;
  int64_t t = t_begin;
  int64_t tile = 0;
  TokenTiles<kTokenBlock>(group, n_in, row0, n_rows, parts, x, t_begin, t, t_end, bias, prefetch, tile);
  LastTokens<kTokenBlock - 1>(group, n_in, row0, n_rows, parts, x, t_begin, t, t_end, bias, prefetch, tile);
}

#if defined(SPLITSPEC_Q8_AVX2)
#define SPLITSPEC_Q8_DECODE_STREAMS 1
// Decode reads each group once, and one group is one sequential stream of weights: with AVX2 a
// thread reading a single stream stays well under the machine's read bandwidth, because the
// hardware prefetchers keep too few lines of one stream in flight. Four streams a thread (as
// the F16 and F32 kernels' row streams, matmul.cc) keep more coming. Group's prefetch of the
// next group, spread over this one's blocks, measured slower with them: its instructions cost
// more than they hid. Zen 3, 2 threads, 40 matrices of 2048 x 768 in turn (67 MB), ten
// alternating runs, medians: one stream with that prefetch 2.72 ms; 2 / 4 / 8 streams without
// 2.47 / 2.07 / 2.11 ms; 4 streams with it one or two groups ahead 2.40 and 2.19 ms. What does
// pay is each stream prefetching its own next lines (kValuePrefetchQuads): with it 2, 3, 4 and
// 6 streams measured within the noise of each other.
constexpr int kDecodeStreams = 4;

// Groups [first, first + kDecodeStreams * count) against one token, as kDecodeStreams streams of
// `count` groups walked upwards: group i of stream s is
// first + s * count + i.
void GroupStreamRun(const uint8_t* w, int64_t n_rows, int64_t n_in, int64_t first, int64_t count,
                    absl::Span<const OutputPart> parts, const QuantizedTokens& x, const float* bias) {
  const size_t group_bytes = Q8GroupBytes(n_in);
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t* groups[kDecodeStreams];
    for (int s = 0; s < kDecodeStreams; ++s) groups[s] = w + (first + s * count + i) * group_bytes;
    float results[kDecodeStreams][kQ8GroupRows];
    GroupStreamsTile<kDecodeStreams>(groups, n_in, x, results);
    for (int s = 0; s < kDecodeStreams; ++s) {
      StoreGroup<1>(&results[s], (first + s * count + i) * kQ8GroupRows, n_rows, parts, 0, bias);
    }
  }
}

// out = x W^T (+ bias) for the one token quantized in x: runs of kDecodeStreams groups shared
// out by ForEachClaim, the groups past the last whole run one at a time.
void DecodeGroups(const uint8_t* w, int64_t n_rows, int64_t n_in, absl::Span<const OutputPart> parts,
                  const QuantizedTokens& x, const float* bias) {
  const int64_t n_groups = Q8GroupCount(n_rows);
  const int64_t n_runs = n_groups / kDecodeStreams;
  ForEachClaim(n_runs, WorthParallel(4 * n_rows * n_in), [&](int64_t first, int64_t count) {
    GroupStreamRun(w, n_rows, n_in, first * kDecodeStreams, count, parts, x, bias);
  });
  for (int64_t g = n_runs * kDecodeStreams; g < n_groups; ++g) Group(w, n_rows, n_in, g, parts, x, 0, 1, bias);
}
#endif

}  // namespace

void MatMulQ8(const uint8_t* w, int64_t n_rows, int64_t n_in, absl::Span<const OutputPart> parts,
              const std::vector<const float*>& x_rows, const float* bias) {
  const int64_t n_tokens = static_cast<int64_t>(x_rows.size());
  // The threads share out the groups as ForEachRowBlock shares out row blocks: one index per
  // group (a part of one-row blocks), each group writing its rows to whichever parts hold them.
  const OutputPart groups{nullptr, 0, Q8GroupCount(n_rows)};
  thread_local QuantizedTokens scratch;
  const QuantizedTokens& x = scratch;  // the workers read this thread's copy, not their own
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
    const int64_t t1 = std::min(n_tokens, t0 + kTokenTile);
    scratch.Quantize(x_rows, t0, t1, n_in);
#if defined(SPLITSPEC_Q8_DECODE_STREAMS)
    if (n_tokens == 1) return DecodeGroups(w, n_rows, n_in, parts, x, bias);
#endif
    ForEachRowBlock<1>({&groups, 1}, WorthParallel(4 * n_rows * n_in * (t1 - t0)),
                       [&](auto, int64_t g, const OutputPart&) {
                         Group(w, n_rows, n_in, g, parts, x, t0, t1, bias);
                       });
  }
}

}  // namespace splitspec::engine::cpu
