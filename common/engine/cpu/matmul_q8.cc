// Q8_0 weights (dtype.h) times activations quantized the same way, for the CPU backend.
//
// Why quantize the activations: widening each int8 weight to f32 and multiplying it by its
// block scale costs about four vector instructions per 16 weights, which made int8 decode
// compute-bound at less than half the machine's read bandwidth. With both sides in int8, a
// VNNI instruction multiplies 64 pairs and sums each group of 4 into an int32 lane, and the
// per-block scales are applied once per group sum; decode then waits on memory, not on
// arithmetic. This is what llama.cpp's Q8_0 path does as well.
//
// The arithmetic, the same on every path: a token's row of K activations is quantized per block
// of 32 (d = max|x| / 127, q = round-half-even(x / d)); the group sums g = sum of 4 consecutive
// q_w * q_x are exact integers; each becomes f32 and is multiplied by d_w * d_x of its block and
// added into its lane's accumulator, blocks in order; the lanes are reduced by a fixed sequence.
// A result depends only on its weight row and its token's row, so batching, tiling and
// threading never change its bits (the batch-invariance contract of backend.h).
//
// AVX-512 VNNI processes two blocks per step in 16 lanes; without it (AVX2) and in the portable
// fallback one block per step in 8 lanes. The lane count changes how sums are rounded, so the
// three paths agree closely but not bit for bit: results are reproducible within one build.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/engine/cpu/kernels.h"
#include "common/engine/cpu/matmul_parts.h"
#include "common/engine/cpu/simd.h"
#include "common/engine/dtype.h"

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define SPLITSPEC_Q8_AVX512_VNNI 1
#endif

namespace splitspec::engine::cpu {
namespace {

constexpr int64_t kTokenTile = 128;  // tokens quantized at a time: bounded scratch for long prefills
constexpr int kGroup = 4;            // products summed exactly into one int32 lane

#if defined(SPLITSPEC_Q8_AVX512_VNNI)
constexpr int kRowBlock = 4;  // 12 accumulators, 4 weight vectors, 4 scale sets of 32 registers
constexpr int kTokenBlock = 3;
constexpr int kStepWeights = 64;  // two blocks per step
#else
constexpr int kRowBlock = 2;
constexpr int kTokenBlock = 3;
constexpr int kStepWeights = 32;  // one block per step
#endif
constexpr int kStepLanes = kStepWeights / kGroup;

// Activations of up to kTokenTile tokens in the kernel's form. Each token's row is padded with
// zeros to a whole number of steps, so a step past a row's last block adds nothing.
class QuantizedTokens {
 public:
  void Quantize(const std::vector<const float*>& x_rows, int64_t t0, int64_t t1, int64_t n_in) {
    padded_ = (n_in + kStepWeights - 1) / kStepWeights * kStepWeights;
    const int64_t n = t1 - t0;
    values_.assign(static_cast<size_t>(n * padded_), 0);
    scales_.assign(static_cast<size_t>(n * padded_ / kGroup), 0.0f);
    offsets_.assign(static_cast<size_t>(n * padded_ / kGroup), 0);
    for (int64_t t = 0; t < n; ++t) QuantizeRow(x_rows[t0 + t], n_in, t);
  }
  // Token t's int8 values (padded length), the block scale of each group of 4, and -128 x the
  // sum of each group's values (what the VNNI path's unsigned weights add, negated: the VNNI
  // sums start from it; see DotTile).
  const int8_t* values(int64_t t) const { return values_.data() + t * padded_; }
  const float* scales(int64_t t) const { return scales_.data() + t * padded_ / kGroup; }
  const int32_t* offsets(int64_t t) const { return offsets_.data() + t * padded_ / kGroup; }

 private:
  // Quantizes block by block: scale d = max|x| / 127, values round-half-even(x * 127 / max|x|).
  // A block holding an inf or NaN gets a NaN scale, and its products NaN, as the F32 kernels
  // would give (rounding a NaN to int8 would be undefined).
  void QuantizeRow(const float* x, int64_t n_in, int64_t t) {
    int8_t* q = values_.data() + t * padded_;
    float* scales = scales_.data() + t * padded_ / kGroup;
    int32_t* offsets = offsets_.data() + t * padded_ / kGroup;
    constexpr int kGroups = kQ8BlockSize / kGroup;
    for (int64_t b = 0; b < n_in / kQ8BlockSize; ++b) {
      const float* xb = x + b * kQ8BlockSize;
      int8_t* qb = q + b * kQ8BlockSize;
      float amax = 0;
      bool finite = true;
      for (int i = 0; i < kQ8BlockSize; ++i) {
        amax = std::max(amax, std::fabs(xb[i]));
        finite = finite && std::isfinite(xb[i]);  // std::max would drop a NaN
      }
      if (!finite) {
        std::fill(scales + b * kGroups, scales + (b + 1) * kGroups, std::numeric_limits<float>::quiet_NaN());
        continue;  // values and offsets stay 0
      }
      const float d = amax / 127.0f;
      const float inverse = amax == 0.0f ? 0.0f : 127.0f / amax;
      for (int i = 0; i < kQ8BlockSize; ++i) {
        // |x| * 127 / amax <= 127 up to rounding, which nearbyint cannot carry past 127.
        qb[i] = static_cast<int8_t>(std::clamp(std::nearbyint(xb[i] * inverse), -127.0f, 127.0f));
      }
      for (int g = 0; g < kGroups; ++g) {
        scales[b * kGroups + g] = d;
        int32_t sum = 0;
        for (int i = 0; i < kGroup; ++i) sum += qb[g * kGroup + i];
        offsets[b * kGroups + g] = -128 * sum;
      }
    }
  }

  int64_t padded_ = 0;
  std::vector<int8_t> values_;
  std::vector<float> scales_;
  std::vector<int32_t> offsets_;
};

inline float Scale(const uint8_t* row, int64_t block) {
  uint16_t h;
  std::memcpy(&h, Q8RowScales(row) + 2 * block, sizeof h);
  return HalfToF32(h);
}

#if defined(SPLITSPEC_Q8_AVX512_VNNI)

// Lanes 0-7 take block 2j's scale and lanes 8-15 block 2j + 1's, from 16 scales in a register.
alignas(64) constexpr int32_t kPairScaleIndex[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},         {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},         {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},         {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13}, {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15},
};

// result[r][t] for an RB x TB tile. VNNI multiplies unsigned by signed bytes, so the weights are
// made unsigned by adding 128 (an exclusive-or of the sign bit), and each group sum starts from
// -128 x the token's group sum, which takes that back: exact integers either way. Starting there
// rather than subtracting afterwards saves one of the five instructions per row, token and step.
template <int RB, int TB>
void DotTile(const uint8_t* const* w_rows, int64_t n_in, const QuantizedTokens& x, int64_t t, const char* prefetch,
             size_t prefetch_bytes_per_step, float result[RB][TB]) {
  const int64_t n_blocks = n_in / kQ8BlockSize;
  const int64_t n_steps = (n_blocks + 1) / 2;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const int8_t* w_values[RB];
  for (int r = 0; r < RB; ++r) w_values[r] = Q8RowValues(w_rows[r], n_in);
  __m512 acc[RB][TB];
  for (int r = 0; r < RB; ++r)
    for (int j = 0; j < TB; ++j) acc[r][j] = _mm512_setzero_ps();
  __m512 scales16[RB];
  for (int64_t step = 0; step < n_steps; ++step) {
    if (step % 8 == 0) {  // the next 16 blocks' scales of each row
      const int64_t left = std::min<int64_t>(16, n_blocks - 2 * step);
      const __mmask16 mask = static_cast<__mmask16>((1u << left) - 1);
      for (int r = 0; r < RB; ++r) {
        scales16[r] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, Q8RowScales(w_rows[r]) + 4 * step));
      }
    }
    PrefetchStep(prefetch, step, prefetch_bytes_per_step);
    const __m512i pick = _mm512_load_si512(kPairScaleIndex[step % 8]);
    const __mmask64 bytes = 2 * step + 1 < n_blocks ? ~__mmask64{0} : __mmask64{0xffffffff};
    __m512i w[RB];
    __m512 w_scale[RB];
    for (int r = 0; r < RB; ++r) {
      w[r] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(bytes, w_values[r] + step * kStepWeights), flip);
      w_scale[r] = _mm512_permutexvar_ps(pick, scales16[r]);
    }
    for (int j = 0; j < TB; ++j) {
      const __m512i xq = _mm512_loadu_si512(x.values(t + j) + step * kStepWeights);
      const __m512i offset = _mm512_loadu_si512(x.offsets(t + j) + step * kStepLanes);
      const __m512 x_scale = _mm512_loadu_ps(x.scales(t + j) + step * kStepLanes);
      for (int r = 0; r < RB; ++r) {
        const __m512i sums = _mm512_dpbusd_epi32(offset, w[r], xq);
        acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(w_scale[r], x_scale), acc[r][j]);
      }
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int j = 0; j < TB; ++j) result[r][j] = _mm512_reduce_add_ps(acc[r][j]);
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

inline float ReduceAdd8(__m256 v) {
  const __m128 sum4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 sum2 = _mm_add_ps(sum4, _mm_movehl_ps(sum4, sum4));
  return _mm_cvtss_f32(_mm_add_ss(sum2, _mm_movehdup_ps(sum2)));
}

// result[r][t] for an RB x TB tile. maddubs multiplies unsigned by signed bytes, so the token's
// signs move onto the weights (|x| * sign(x) w); pairs then sum without saturation because
// |q| <= 127, and a second multiply-add by 1 sums each group of 4.
template <int RB, int TB>
void DotTile(const uint8_t* const* w_rows, int64_t n_in, const QuantizedTokens& x, int64_t t, const char* prefetch,
             size_t prefetch_bytes_per_step, float result[RB][TB]) {
  const int64_t n_blocks = n_in / kQ8BlockSize;
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* w_values[RB];
  for (int r = 0; r < RB; ++r) w_values[r] = Q8RowValues(w_rows[r], n_in);
  __m256 acc[RB][TB];
  for (int r = 0; r < RB; ++r)
    for (int j = 0; j < TB; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    PrefetchStep(prefetch, b, prefetch_bytes_per_step);
    __m256i w[RB];
    __m256 w_scale[RB];
    for (int r = 0; r < RB; ++r) {
      w[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_values[r] + b * kQ8BlockSize));
      w_scale[r] = _mm256_set1_ps(Scale(w_rows[r], b));
    }
    for (int j = 0; j < TB; ++j) {
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.values(t + j) + b * kQ8BlockSize));
      const __m256i x_abs = _mm256_abs_epi8(xq);
      const __m256 x_scale = _mm256_loadu_ps(x.scales(t + j) + b * kStepLanes);
      for (int r = 0; r < RB; ++r) {
        const __m256i pairs = _mm256_maddubs_epi16(x_abs, _mm256_sign_epi8(w[r], xq));
        const __m256i sums = _mm256_madd_epi16(pairs, ones);
        acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(w_scale[r], x_scale), acc[r][j]);
      }
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int j = 0; j < TB; ++j) result[r][j] = ReduceAdd8(acc[r][j]);
}

#else  // portable: the AVX2 path's arithmetic, lane by lane

template <int RB, int TB>
void DotTile(const uint8_t* const* w_rows, int64_t n_in, const QuantizedTokens& x, int64_t t, const char* prefetch,
             size_t prefetch_bytes_per_step, float result[RB][TB]) {
  const int64_t n_blocks = n_in / kQ8BlockSize;
  for (int r = 0; r < RB; ++r) {
    const int8_t* w = Q8RowValues(w_rows[r], n_in);
    for (int j = 0; j < TB; ++j) {
      const int8_t* q = x.values(t + j);
      float acc[kStepLanes] = {};
      for (int64_t b = 0; b < n_blocks; ++b) {
        PrefetchStep(r == 0 && j == 0 ? prefetch : nullptr, b, prefetch_bytes_per_step);
        const float w_scale = Scale(w_rows[r], b);
        for (int lane = 0; lane < kStepLanes; ++lane) {
          const int64_t first = b * kQ8BlockSize + lane * kGroup;
          int32_t sum = 0;
          for (int i = 0; i < kGroup; ++i) sum += int32_t{w[first + i]} * q[first + i];
          acc[lane] += static_cast<float>(sum) * (w_scale * x.scales(t + j)[b * kStepLanes + lane]);
        }
      }
      float total = 0;
      for (float a : acc) total += a;
      result[r][j] = total;
    }
  }
}

#endif

// Tiles of RB rows x TB tokens from token t while TB tokens remain, advancing t; the first tile
// issues the row block's prefetch.
template <int RB, int TB>
void TokenTiles(const uint8_t* const* w_rows, int64_t n_in, int64_t row0, const OutputPart& part,
                const QuantizedTokens& x, int64_t t_tile0, int64_t& t, int64_t t_end, const float* bias,
                const char*& prefetch, size_t prefetch_bytes_per_step) {
  const int64_t col0 = row0 - part.first_row;
  for (; t + TB <= t_end; t += TB) {
    float result[RB][TB];
    DotTile<RB, TB>(w_rows, n_in, x, t - t_tile0, prefetch, prefetch_bytes_per_step, result);
    prefetch = nullptr;
    for (int r = 0; r < RB; ++r)
      for (int j = 0; j < TB; ++j)
        part.out[(t + j) * part.n_cols + col0 + r] = result[r][j] + (bias ? bias[row0 + r] : 0.0f);
  }
}

// One block of RB weight rows against tokens [t_begin, t_end) (quantized in x from t_begin).
template <int RB>
void RowBlock(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_in, int64_t row0, int direction,
              const OutputPart& part, const QuantizedTokens& x, int64_t t_begin, int64_t t_end, const float* bias) {
  const uint8_t* w_rows[RB];
  for (int r = 0; r < RB; ++r) w_rows[r] = w + (row0 + r) * row_bytes;
  const char* prefetch = RowsToPrefetch(w, row_bytes, n_rows, row0, RB, direction);
  const int64_t n_steps = (n_in + kStepWeights - 1) / kStepWeights;
  const size_t prefetch_bytes_per_step = (RB * row_bytes + n_steps - 1) / n_steps;
  int64_t t = t_begin;
  TokenTiles<RB, kTokenBlock>(w_rows, n_in, row0, part, x, t_begin, t, t_end, bias, prefetch, prefetch_bytes_per_step);
  // Each loop below runs at most once: fewer than kTokenBlock tokens are left.
  TokenTiles<RB, 2>(w_rows, n_in, row0, part, x, t_begin, t, t_end, bias, prefetch, prefetch_bytes_per_step);
  TokenTiles<RB, 1>(w_rows, n_in, row0, part, x, t_begin, t, t_end, bias, prefetch, prefetch_bytes_per_step);
}

}  // namespace

void MatMulQ8(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_in, absl::Span<const OutputPart> parts,
              const std::vector<const float*>& x_rows, const float* bias) {
  static_assert(kTokenBlock == 3, "RowBlock's remainder tiles assume 3-token tiles");
  const int64_t n_tokens = static_cast<int64_t>(x_rows.size());
  thread_local QuantizedTokens scratch;
  const QuantizedTokens& x = scratch;  // the workers read this thread's copy, not their own
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
    const int64_t t1 = std::min(n_tokens, t0 + kTokenTile);
    scratch.Quantize(x_rows, t0, t1, n_in);
    ForEachRowBlock<kRowBlock>(parts, WorthParallel(4 * n_rows * n_in * (t1 - t0)),
                               [&](auto rb, int64_t row0, const OutputPart& part, int direction) {
                                 RowBlock<decltype(rb)::value>(w, row_bytes, n_rows, n_in, row0, direction, part, x, t0, t1, bias);
                               });
  }
}

}  // namespace splitspec::engine::cpu
