// Weight-times-activations GEMM for the CPU backend: out (T, n_out) = x (T, K) W^T (n_out, K).
//
// Register blocking: a tile of kRowBlock weight rows x kTokenBlock tokens shares every load, so
// a 16-token verify costs little more weight traffic than a 1-token decode. Every output
// element still has exactly one accumulator that walks K in order (see simd.h), so the tile
// shape, the number of tokens and the thread that owns a row never change a result's bits.
//
// Decode is a stream over the weights, so its speed is the memory bandwidth we reach. A row
// block is kRowBlock short rows (768 elements: 3 KB in F32, 1.5 KB in F16) read side by side;
// each of those streams ends before the hardware prefetchers have ramped up, and a thread then
// stalls on every new block. So while computing block b we prefetch block b + kPrefetchBlocks
// into L2, spread evenly over b's k-steps. Measured on the medium model, 1 thread, batch 1:
// all matmuls of a forward 19.5 -> 14.0 ms (F32) and 14.4 -> 7.0 ms (F16). A forward of one
// token, and an F32 forward of a few, reads its rows as long streams instead (ForwardStreams
// below).
#include <algorithm>
#include <vector>

#include "common/engine/cpu/kernels.h"
#include "common/engine/cpu/matmul_parts.h"
#include "common/engine/cpu/row_groups.h"
#include "common/engine/cpu/simd.h"

namespace splitspec::engine::cpu {
namespace {

// Tiles of kRowBlock rows x kTokenBlock<Format> tokens, then one tile of the tokens left. With
// AVX-512, F16 and BF16 take six tokens a tile rather than four, which widens each weight
// vector once for more tokens: all matmuls of a 16-token forward of the medium F16 model
// measured 10% faster. F32, with nothing to widen, reads faster four tokens a tile. Zen 5, 2
// threads, the matmuls of a forward of the medium and the large preset's shapes (12 layers and
// the output, random weights), 6 / 4 tokens a tile alternating (a harness not kept), medians of
// 8-12, ms: 16 tokens medium 19.075 / 16.306, 16.043 / 14.829, 14.365 / 13.961, large 116.575
// / 112.132, 107.360 / 101.377, 104.895 / 97.240; 8 tokens medium 13.097 / 12.222, 10.883 /
// 10.638, 10.900 / 10.496, large 84.166 / 78.313, 76.979 / 73.459, 74.855 / 65.752; 32 tokens
// 24.879 / 22.941 and 177.895 / 158.679; 6, 7 and 10 tokens faster at the large shapes, up to
// 7% slower at the medium ones; from 48 tokens on no order (64: 42.095 / 42.724, 299.594 /
// 319.189, 38.143 / 40.518, 309.640 / 304.433). BF16's six stay ahead of four there (58.927 /
// 64.755, 64.874 / 67.588 at 16 tokens, large).
#if defined(__AVX512F__)
constexpr int kRowBlock = 4;  // up to 24 accumulators + 6 activations + 1 weight of 32 registers
template <typename Format>
constexpr int kTokenBlock = 6;
template <>
constexpr int kTokenBlock<F32Weights> = 4;
template <>
constexpr int kTokenBlock<InRowGroups<F32Weights>> = 4;
#else
constexpr int kRowBlock = 2;  // 8 accumulators + 4 activations + 1 weight of 16 AVX2 registers
template <typename Format>
constexpr int kTokenBlock = 4;
#endif
constexpr int64_t kTokenTile = 128;  // activations of one tile stay in L2 while W streams
static_assert(!kRowGroupsBuilt || kRowBlock == kRowGroupRows, "a row block is one group of rows");

// Where a kernel finds W's row `row`: row-major, or in groups of rows (row_groups.h), where
// the format InRowGroups<F> reads a row's elements at their places in its group.
template <typename Format>
struct RowsOf {
  static constexpr bool kInGroups = false;
  static const uint8_t* Row(const uint8_t* w, size_t row_bytes, int64_t row) { return w + row * row_bytes; }
};
template <typename Format>
struct RowsOf<InRowGroups<Format>> {
  static constexpr bool kInGroups = true;
  static const uint8_t* Row(const uint8_t* w, size_t row_bytes, int64_t row) {
    return RowInGroups(w, row_bytes, Format::kVectorBytes, row);
  }
};

// result[r][t] = dot(w_rows[r], x_rows[t]) for an RB x TB tile; prefetch_step(step) is called
// at each k-step (step = k / kLanes) to ask for weights ahead of use. This is where the
// accumulation order is written: one accumulator per output, K in order (GroupDecodeTile below
// repeats it for decode over groups of rows, tested against this bit for bit).
template <typename Format, int RB, int TB, typename PrefetchFn>
inline void DotTile(const uint8_t* const* w_rows, const float* const* x_rows, int64_t n_in,
                    PrefetchFn&& prefetch_step, float result[RB][TB]) {
  VecF acc[RB][TB];
  for (int r = 0; r < RB; ++r)
    for (int t = 0; t < TB; ++t) acc[r][t] = Zero();
  int64_t k = 0;
  for (; k + kLanes <= n_in; k += kLanes) {
    prefetch_step(k / kLanes);
    VecF xv[TB];
    for (int t = 0; t < TB; ++t) xv[t] = Load(x_rows[t] + k);
    for (int r = 0; r < RB; ++r) {
      const VecF wv = Format::Load(w_rows[r], k);
      for (int t = 0; t < TB; ++t) acc[r][t] = Fma(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < RB; ++r) {
    for (int t = 0; t < TB; ++t) {
      float sum = ReduceAdd(acc[r][t]);
      for (int64_t kk = k; kk < n_in; ++kk) sum += Format::Scalar(w_rows[r], kk) * x_rows[t][kk];
      result[r][t] = sum;
    }
  }
}


// Runs RB x TB tiles from token t while TB tokens remain, advancing t and the block's tile
// count `tile`; each asks for its share of the block's prefetch.
template <typename Format, int RB, int TB>
inline void TokenTiles(const uint8_t* const* w_rows, int64_t n_in, int64_t row0, const OutputPart& part,
                       int64_t col0, const float* const* x_rows, int64_t& t, int64_t t_end, const float* bias,
                       const BlockPrefetch& prefetch, int64_t& tile) {
  for (; t + TB <= t_end; t += TB, ++tile) {
    float result[RB][TB];
    // Into L2, the hint as a constant (every block of several tokens asks with kL2): through
    // share.Step the compiler carried both hints' instructions and a branch into the loop.
    const StepPrefetch share = prefetch.ShareOf(tile);
    DotTile<Format, RB, TB>(
        w_rows, x_rows + t, n_in, [share](int64_t step) { PrefetchStep(share.at, step, share.bytes_per_step); },
        result);
    for (int r = 0; r < RB; ++r)
      for (int j = 0; j < TB; ++j)
        part.out[(t + j) * part.n_cols + col0 + r] = result[r][j] + (bias ? bias[row0 + r] : 0.0f);
  }
}

// Who asks for a row block's prefetch: its first tile alone, at the pace it reads the block
// (ForwardRowGroups, whose prefetch runs a fixed distance ahead of the rows being read), or its
// first tiles in turn (the block kPrefetchBlocks ahead, MatMulTyped), each of up to a power of
// two tiles asking for at least a cache line a step (SharedBlockPrefetch): with AVX-512, F16 and
// BF16 blocks are shared by up to two tiles, F32 ones by up to four; with AVX2 a block's step is
// at most a line (2 rows of 8 lanes), and its first tile keeps it all. Asked for by the first tile
// alone, a block's lines are requested within a third (16 tokens) or a sixth (32) of its time,
// and tiles stalled on them. Zen 5, 2 threads, the matmuls of a forward of the large preset's
// shapes (12 layers and the output, random weights), first tile / shared alternating in one
// process (a harness not kept), ratio of the medians of 8, four rounds each (shared faster in):
// 7 tokens BF16 0.810 (4), F32 0.959 (4); 8 tokens BF16 0.852 (4), F16 0.866 (4), F32 0.921 (4);
// 16 tokens BF16 0.931 (4), F16 0.946 (4), F32 0.950 (4); 32 tokens 0.979 (3), 0.996 (2), 0.990
// (2); the medium preset's shapes, 16 tokens: BF16 0.935 (4), F16 0.899 (4), F32 0.860 (4); one
// thread, large, BF16 16 tokens 0.926 (3 of 3). Blocks 1, 3 or 4 ahead instead of 2 measured no
// better. A block of few-token F32 forwards over groups stays with its first tile: shared by
// the tiles of two tokens, 3 and 5 tokens measured 3-4% slower (its distance ahead is in bytes).
enum class PrefetchBy { kFirstTile, kSharedTiles };

// RB weight rows (W rows row0.., inside `part`) against tokens [t_begin, t_end), in tiles of
// kTokens, then one tile of exactly the tokens left (fewer than kTokens). One tile per
// remainder rather than 4 + 2 + 1 pieces: every tile loads (and, for F16/BF16, widens) each
// weight vector once, so 3 tokens as 2 + 1 cost more than 4 did (measured on the bundled BF16
// target, 1 thread: 3 tokens 3.56 ms against 4 tokens' 3.26; 5 tokens 4.08 against 6's 3.81).
// `prefetch` (or nullptr): the RB rows' worth of bytes to ask for, as `by` says.
template <typename Format, int RB, int kTokens>
void TileRows(const uint8_t* const* w_rows, int64_t n_in, int64_t row0, const OutputPart& part,
              const float* const* x_rows, int64_t t_begin, int64_t t_end, const float* bias, const char* prefetch,
              PrefetchBy by) {
  const int64_t col0 = row0 - part.first_row;
  const size_t bytes_per_step = RB * Format::kVectorBytes;
  const int64_t n_steps = n_in / kLanes;
  const BlockPrefetch plan =
      by == PrefetchBy::kSharedTiles
          ? SharedBlockPrefetch(prefetch, bytes_per_step, n_steps, (t_end - t_begin + kTokens - 1) / kTokens)
          : BlockPrefetch{prefetch, bytes_per_step, n_steps, 1};
  int64_t t = t_begin;
  int64_t tile = 0;
  TokenTiles<Format, RB, kTokens>(w_rows, n_in, row0, part, col0, x_rows, t, t_end, bias, plan, tile);
  // Each call below runs at most one tile: fewer than kTokens tokens are left.
  if constexpr (kTokens > 5) {
    TokenTiles<Format, RB, 5>(w_rows, n_in, row0, part, col0, x_rows, t, t_end, bias, plan, tile);
  }
  if constexpr (kTokens > 4) {
    TokenTiles<Format, RB, 4>(w_rows, n_in, row0, part, col0, x_rows, t, t_end, bias, plan, tile);
  }
  if constexpr (kTokens > 3) {
    TokenTiles<Format, RB, 3>(w_rows, n_in, row0, part, col0, x_rows, t, t_end, bias, plan, tile);
  }
  if constexpr (kTokens > 2) {
    TokenTiles<Format, RB, 2>(w_rows, n_in, row0, part, col0, x_rows, t, t_end, bias, plan, tile);
  }
  if constexpr (kTokens > 1) {
    TokenTiles<Format, RB, 1>(w_rows, n_in, row0, part, col0, x_rows, t, t_end, bias, plan, tile);
  }
}

// One block of RB weight rows (W rows row0.., inside `part`) against tokens [t_begin, t_end),
// kTokens a tile (TileRows), asking for `prefetch` (nullptr: nothing) as `by` says.
template <typename Format, int RB, int kTokens = kTokenBlock<Format>>
void RowBlock(const uint8_t* w, size_t row_bytes, int64_t n_in, int64_t row0, const OutputPart& part,
              const float* const* x_rows, int64_t t_begin, int64_t t_end, const float* bias, const char* prefetch,
              PrefetchBy by) {
  const uint8_t* w_rows[RB];
  for (int r = 0; r < RB; ++r) w_rows[r] = RowsOf<Format>::Row(w, row_bytes, row0 + r);
  TileRows<Format, RB, kTokens>(w_rows, n_in, row0, part, x_rows, t_begin, t_end, bias, prefetch, by);
}

// One token's forward is nothing but reads, so it gets its own traversal: a thread's run of
// rows is read as kStreams long streams (stream i holds `count` consecutive rows; a step takes
// one row from each), each asking for its rows kStreamPrefetchBytes ahead with AVX-512. Short
// streams (the kRowBlock adjacent rows of a block) end before the hardware prefetchers ramp up, and a thread
// waits at every new block; long ones keep them running. The medium model's batch-1 decode, 2
// threads, the traversals alternating step by step in one process, medians of 30-40 steps, two
// runs: F32 row blocks 12.80 and 11.38 ms, 8 streams 12.09 and 10.25 (4 streams 12.46 and 10.78);
// BF16 row blocks 6.89 and 6.40, 1 stream 6.61 and 6.09 (4 streams no faster than row blocks,
// 8 slower than 4); F16 row blocks 6.63 and 6.56, 1 stream 6.39 and 6.25. Several tokens are a
// compute tile each, where row blocks measured faster for BF16 (16 tokens 18.7-19.0 against
// 20.1-20.4 ms as 4 streams) and slower for F32 (27.5-27.7 against 26.2); F32 forwards of up
// to kStreamForwardTokens tokens read streams (below), the rest row blocks.
// Those figures are AVX-512's. With AVX2 one F16 or BF16 stream is bound by its arithmetic, not
// by memory: its row has one accumulator (the fixed order of simd.h), so each fused multiply-add
// of 8 widened weights waits for the one before, about 16 bytes per FMA latency (5 cycles on
// Zen 3), some 10 GB/s a core. Four streams are four independent chains. Zen 3 (2 cores, AVX2),
// medium model, batch-1 decode, 1 and 4 streams alternating over eight runs of `bench-engine
// --steps 30 --batches 1 --forward-tokens 1`, medians: F16 12.28 -> 9.43 ms, BF16 12.42 -> 10.82;
// five runs of 1, 2, 4 and 8 streams: F16 11.29 / 10.24 / 8.20 / 9.76 ms, BF16 11.16 / 10.38 /
// 9.00 / 10.64.
// On a Zen 5 (AVX-512, 2 cores), whose memory answers in two regimes a minute or so each, one
// F16 or BF16 stream a thread stops at about 63 GB/s in the fast one: two streams are what a
// thread keeps in flight there. The medium model's matrices in turn with one token, 1 and 2
// streams alternating pass by pass (a harness not kept), medians of 40-100 passes, six rounds
// of each format: fast minutes F16 2.612 -> 2.149 ms, 2.598 -> 2.192, 2.448 -> 1.996, 3.075 ->
// 2.231, BF16 2.562 -> 2.042, 2.460 -> 1.895; slow ones F16 3.582 -> 3.610, 3.157 -> 3.322,
// 3.830 -> 4.081, BF16 3.090 -> 3.226, 3.512 -> 3.522. Four streams measured between the two
// (F16 2.396 against 2.448 and 1.996). Two adjacent rows at a time from one stream (two
// multiply-add chains, the reads unchanged) measured no faster than one: it is the reads in
// flight, not the arithmetic's latency. F32 too read two streams there rather than the eight
// it reads with AVX2: 8 / 2 / 4 streams, the same harness, medians of 25 passes, 5.538 / 4.794 /
// 5.193 ms in a fast minute, 6.534 / 6.239 / 7.069 and 8.129 / 7.499 / 8.104 in slow ones; eight
// against two and one, five slow rounds, 8.003 / 7.332 / 7.190, 8.156 / 7.403 / 7.111, 8.413 /
// 7.740 / 7.811, 9.365 / 8.545 / 8.583, 7.737 / 7.354 / 6.902. Three streams read slower than
// two for F32 and BF16 alike (BF16 4.022 / 4.373, 3.976 / 4.375, 3.597 / 3.736). F32 then
// went to one stream, as the last of those rounds hinted: an F32 row is 3 KB, twice an F16
// one, and a thread's one stream of them keeps enough in flight. The same harness, 2 / 1
// streams, medians of 30 passes, seven rounds: 8.248 / 7.617 ms, 4.955 / 4.684 (a fast minute),
// 7.649 / 7.353, 8.081 / 7.787, 5.610 / 5.255 (fast), 8.725 / 8.365, 8.109 / 7.389; decode steps
// of the medium F32 model, the two alternating step by step, medians of 40, six rounds: 8.741 /
// 8.176 ms, 7.205 / 5.961, 6.662 / 5.341, 5.953 / 5.022, 5.221 / 4.894, 5.498 / 5.091. F16 and
// BF16 keep two: one was faster in slow minutes (F16 3.654 / 3.449, 3.717 / 3.576; BF16 3.912 /
// 3.672) and slower in a fast one (BF16 3.280 / 3.601), as above.
template <typename Format>
#if defined(__AVX512F__)
constexpr int kDecodeStreams = 2;
template <>
constexpr int kDecodeStreams<F32Weights> = 1;
#else
constexpr int kDecodeStreams = 4;
template <>
constexpr int kDecodeStreams<F32Weights> = 8;
#endif
// 6 KB ahead of each stream (2 rows of the medium model's F32 rows, 4 of its BF16 rows):
// 3 KB measured the same for F32 and slower for BF16, 12 KB slower for BF16; with F32's one
// stream 3 / 6 / 9 KB measured level (7.549 / 7.787 / 7.839 ms, 5.203 / 5.255 / 4.968, 8.323 /
// 8.365 / 8.295, 7.497 / 7.389 / 7.667). In bytes, whatever a row's length: the distance was
// once rounded up to whole rows, which put the large preset's F32 down projection (rows of 22.5
// KB) a row ahead, beyond what L1 keeps of non-temporal lines (matmul_parts.h). Decode steps of
// that model, whole rows / bytes alternating step by step in one process (a harness not kept),
// medians of 16-20 steps, 13 rounds: bytes faster in 9, median ratio 1.015 (32.486 / 32.003 ms
// and 36.273 / 35.260 in fast minutes; 47.536 / 50.244 the widest the other way). With AVX2 none:
// the hardware prefetchers keep four or eight streams coming on their own, and the prefetch
// instructions only cost (Zen 3, medium model, batch-1 decode, eight alternating runs each,
// medians: F32 12.75 ms with, 12.08 without; F16 6.48 / 6.63 and BF16 6.56 / 6.60 over five).
#if defined(__AVX512F__)
constexpr size_t kStreamPrefetchBytes = 6144;
#else
constexpr size_t kStreamPrefetchBytes = 0;
#endif
// Decode asks for its rows with DecodePrefetchHint (matmul_parts.h): as non-temporal lines on a
// Zen 5, where that read faster than asking for them into L2, each row being read once. Decode
// steps of the medium model, L2 / non-temporal alternating step by step in one process (a
// harness not kept), medians of 40-60 steps: F32 5.186 / 4.870 ms, 7.153 / 7.006, 7.654 /
// 7.195, 5.908 / 5.611, 5.761 / 5.608; F16 3.350 / 3.226, 3.119 / 3.022, 4.809 / 4.787, 5.331 /
// 5.198, 5.587 / 5.559, 5.153 / 5.148, 5.098 / 5.206; BF16 level (3.889 / 4.222, 3.316 / 3.352,
// 5.088 / 4.868, 4.511 / 4.582, 4.909 / 4.929, 5.471 / 5.458, 5.053 / 4.916). int8 decode does
// the same (matmul_q8.cc). Forwards of several tokens read each row again for their later
// tiles, and keep L2. The streams' distances ahead stay within what L1 keeps for them.
// The F16 and BF16 figures above, and the distances tried for them, were measured without
// the prefetches: GCC 12 had dropped them from those streams' loops (see StreamRun), so they
// measured the hardware prefetchers alone. With AVX-512 those matrices are now read in groups
// of rows instead (DecodeRowGroups); the row streams remain for shapes that do not fit them.
static_assert(kDecodeStreams<F32Weights> * kStreamPrefetchBytes <= kMaxNonTemporalBytesAhead &&
                  kDecodeStreams<F16Weights> * kStreamPrefetchBytes <= kMaxNonTemporalBytesAhead &&
                  kDecodeStreams<BF16Weights> * kStreamPrefetchBytes <= kMaxNonTemporalBytesAhead,
              "decode's non-temporal lines must still be in L1 when read");

// A forward of a few tokens (a verify of a short draft) through F32 weights is still mostly a
// read of W, and a row block's short adjacent rows read it as slowly as they do for one token,
// so up to kStreamForwardTokens tokens F32 projections read their rows as kForwardStreams
// streams too, two tokens a tile: each step's rows come once from memory and again from L1 for
// the next two tokens, which is what stops paying beyond five. F16 and BF16 keep the row
// blocks: their weights would be widened again for every two tokens, and as streams (4 x 2 or
// 2 x 4 tiles) they measured slower. Zen 3 (AVX2), the matmuls of a forward of the bundled
// target's shapes (8 layers and the output, 95 MB of F32, distinct buffers), the two ways
// alternating forward by forward, medians of 40-60 (a harness not kept): 2 threads, 2 tokens
// 6.13 / 6.67 ms as row blocks -> 4.97 / 5.09 as streams, 3 tokens 6.51 / 8.50 -> 5.51 / 7.95,
// 4 tokens 5.93 / 7.58 -> 5.87 / 6.66, 5 tokens 6.89 / 7.38 -> 6.69 / 6.83, but 6 tokens 9.37 /
// 9.53 -> 10.70 / 10.78 and 8 tokens 8.71 / 8.68 -> 9.09 / 9.76; 1 thread (as the services run
// on a 2-core machine), 2 tokens 11.97 -> 8.45, 4 tokens 12.24 -> 10.52, 5 tokens 12.63 ->
// 11.08, 6 and 8 tokens level. AVX-512 builds take the same path, not measured there; F32
// matrices they hold in groups (row_groups.h) read their few tokens two a tile too
// (ForwardRowGroups).
template <typename Format>
constexpr int64_t kStreamForwardTokens = 1;  // one token: decode's streams only
template <>
constexpr int64_t kStreamForwardTokens<F32Weights> = 5;
template <>
constexpr int64_t kStreamForwardTokens<InRowGroups<F32Weights>> = 5;  // ForwardRowGroups
constexpr int kForwardStreams = 4;  // 4 x 2 accumulators + 2 activations + 1 weight of 16 AVX2 registers
constexpr int kForwardStreamTokens = 2;

// Where W row `row`'s output goes: column `col` of part `out`, whose rows (one a token) are
// `stride` floats apart, plus its bias (0 without one).
struct RowOutput {
  float* out;
  int64_t col;
  int64_t stride;
  float bias;
};

inline RowOutput OutputOf(absl::Span<const OutputPart> parts, const float* bias, int64_t row) {
  size_t p = 0;
  while (row >= parts[p].first_row + parts[p].n_cols) ++p;
  return {parts[p].out, row - parts[p].first_row, parts[p].n_cols, bias ? bias[row] : 0.0f};
}

// Tiles of kStreams rows x TB tokens from token t while TB tokens remain, advancing t; the
// first tile of a step issues its prefetch (later ones find the rows in cache).
template <typename Format, int kStreams, int TB, typename PrefetchFn>
void StreamTokenTiles(const uint8_t* const* w_rows, int64_t n_in, const float* const* x_rows, int64_t& t,
                      int64_t n_tokens, const RowOutput* outputs, PrefetchFn&& prefetch_step) {
  for (; t + TB <= n_tokens; t += TB) {
    float result[kStreams][TB];
    if (t == 0) {
      DotTile<Format, kStreams, TB>(w_rows, x_rows + t, n_in, prefetch_step, result);
    } else {
      DotTile<Format, kStreams, TB>(w_rows, x_rows + t, n_in, [](int64_t) {}, result);
    }
    for (int s = 0; s < kStreams; ++s) {
      const RowOutput& o = outputs[s];
      for (int j = 0; j < TB; ++j) o.out[(t + j) * o.stride + o.col] = result[s][j] + o.bias;
    }
  }
}

// Rows [first, first + kStreams * count) of W against tokens x_rows[0 .. n_tokens), as kStreams
// streams of `count` rows walked upwards, kTokens tokens a tile (then one). Row i of stream s
// is W row first + s * count + i.
template <typename Format, int kStreams, int kTokens>
void StreamRun(const uint8_t* w, size_t row_bytes, int64_t n_in, int64_t first, int64_t count,
               size_t prefetch_bytes, absl::Span<const OutputPart> parts, const float* bias,
               const float* const* x_rows, int64_t n_tokens) {
  const PrefetchHint hint = kTokens == 1 ? DecodePrefetchHint() : PrefetchHint::kL2;
  const size_t stream_bytes = static_cast<size_t>(count) * row_bytes;
  for (int64_t i = 0; i < count; ++i) {
    // A stream's rows lie one after another: what it reads prefetch_bytes on may be in a later
    // row, and is asked for while it still lies within the stream.
    const bool prefetch = prefetch_bytes > 0 && static_cast<size_t>(i + 1) * row_bytes + prefetch_bytes <= stream_bytes;
    const uint8_t* w_rows[kStreams];
    const uint8_t* prefetch_at[kStreams];
    for (int s = 0; s < kStreams; ++s) {
      w_rows[s] = w + (first + s * count + i) * row_bytes;
      prefetch_at[s] = prefetch ? w_rows[s] + prefetch_bytes : nullptr;
    }
    // Each stream's bytes prefetch_bytes ahead, a line at every step (twice a line for F16
    // and BF16). Not only as the step reaches a new line: GCC 12 dropped the prefetch it would
    // have had to issue on every other iteration, and F16 and BF16 decode streamed without one.
    auto prefetch_step = [&](int64_t k_step) {
      if (!prefetch) return;
      const size_t offset = static_cast<size_t>(k_step) * Format::kVectorBytes;
      for (int s = 0; s < kStreams; ++s) PrefetchLine(prefetch_at[s] + offset, hint);
    };
    // A stream may cross from one part of a fused projection (q, k, v) into the next.
    RowOutput outputs[kStreams];
    for (int s = 0; s < kStreams; ++s) outputs[s] = OutputOf(parts, bias, first + s * count + i);
    int64_t t = 0;
    if constexpr (kTokens > 1) {
      StreamTokenTiles<Format, kStreams, kTokens>(w_rows, n_in, x_rows, t, n_tokens, outputs, prefetch_step);
    }
    StreamTokenTiles<Format, kStreams, 1>(w_rows, n_in, x_rows, t, n_tokens, outputs, prefetch_step);
  }
}

// out = x W^T (+ bias) for tokens x_rows[0 .. n_tokens): W's rows in runs of kStreams * count
// rows shared out by ForEachClaim, the rows past the last whole run of kStreams one at a time.
template <typename Format, int kStreams, int kTokens>
void ForwardStreams(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_in,
                    absl::Span<const OutputPart> parts, const float* const* x_rows, int64_t n_tokens,
                    const float* bias) {
  const int64_t n_runs = n_rows / kStreams;
  ForEachClaim(n_runs, WorthParallel(4 * n_rows * n_in), [&](int64_t first, int64_t count) {
    StreamRun<Format, kStreams, kTokens>(w, row_bytes, n_in, first * kStreams, count, kStreamPrefetchBytes, parts,
                                         bias, x_rows, n_tokens);
  });
  for (int64_t row = n_runs * kStreams; row < n_rows; ++row) {
    StreamRun<Format, 1, kTokens>(w, row_bytes, n_in, row, 1, 0, parts, bias, x_rows, n_tokens);
  }
}

// A forward of a few tokens through an F32 matrix held in groups (row_groups.h), as its rows
// read them (ForwardStreams): the tokens two a tile, each group read from memory for the first
// tile and from cache for the rest, and asked for kStreamPrefetchBytes ahead into L2. A group of
// long rows is one stream of a thread's claims, so the distance runs ahead of where the group
// is read. As row blocks, five tokens took one tile of 4 rows x 5 tokens, 10-20% slower than
// these pairs. Zen 5, 2 threads, 1 GB of matrices of one shape in turn (a harness not kept),
// medians of 20, two rounds, ms, rows (row-major streams) / row blocks / pairs: 5 tokens
// 4096 x 11008 29.615 / 33.033 / 30.339 and 28.330 / 32.461 / 28.449, 11008 x 4096 30.343 /
// 33.058 / 30.053 and 30.108 / 32.033 / 30.692, 4096 x 4096 38.317 / 42.095 / 36.496 and 34.360
// / 39.898 / 33.104, 2048 x 5632 29.523 / 35.255 / 28.821 and 32.271 / 36.322 / 31.841; 4
// tokens 25.683 / 27.464 / 26.507, 25.590 / 27.457 / 24.671, 27.985 / 26.426 / 24.255, 52.345 /
// 60.609 / 48.970; 2 and 3 tokens within a few percent of both (3 tokens, one tile as a row
// block, 2-5% ahead of pairs). Against the rows, the groups as pairs read a few percent either
// way with the minute (5 tokens at 4096 x 11008, groups / rows: 25.554 / 25.808 ms in one run,
// 24.588 / 22.736 in another). F16 and BF16 groups keep their row blocks: as pairs they widen
// each weight again for every two tokens, and F16's 5-token forwards measured 11-27% slower.
template <typename Format>
void ForwardRowGroups(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_in,
                      absl::Span<const OutputPart> parts, const float* const* x_rows, int64_t n_tokens,
                      const float* bias) {
  const size_t matrix_bytes = static_cast<size_t>(n_rows) * row_bytes;
  auto pairs_of_tokens = [&](auto rb, int64_t row0, const OutputPart& part) {
    constexpr int RB = decltype(rb)::value;
    // A whole group's bytes begin at row0 * row_bytes; the rows left over at a part's end
    // (RB = 1) ask for nothing.
    const size_t ahead = static_cast<size_t>(row0) * row_bytes + kStreamPrefetchBytes;
    const char* prefetch = RB == kRowGroupRows && ahead + RB * row_bytes <= matrix_bytes
                               ? reinterpret_cast<const char*>(w + ahead)
                               : nullptr;
    RowBlock<Format, RB, kForwardStreamTokens>(w, row_bytes, n_in, row0, part, x_rows, 0, n_tokens, bias, prefetch,
                                               PrefetchBy::kFirstTile);
  };
  ForEachRowBlock<kRowBlock>(parts, WorthParallel(4 * n_rows * n_in), pairs_of_tokens);
}

// One token against one group of rows (row_groups.h): each step takes a vector of every row
// of the group, each row into its own accumulator, the arithmetic DotTile does for a row (an
// accumulator walking K in order, then ReduceAdd), so the bits are those of the same matrix
// row-major. Rows are addressed from the group's start rather than by a pointer each, which
// left the compiler too few registers. The hint is a template argument and `prefetch` all or
// nothing so that the loop issues its prefetches unconditionally: GCC 12 drops a
// __builtin_prefetch it would issue on only some iterations. The columns are whole vectors
// (HoldsInRowGroups): no tail.
template <typename Format, PrefetchHint kHint>
void GroupDecodeTile(const uint8_t* group, int64_t n_in, const float* x, const char* prefetch,
                     float result[kRowGroupRows]) {
  constexpr size_t kStepBytes = kRowGroupRows * Format::kVectorBytes;  // one vector of each row
  VecF acc[kRowGroupRows];
  for (int r = 0; r < kRowGroupRows; ++r) acc[r] = Zero();
  for (int64_t k = 0; k < n_in; k += kLanes) {
    const size_t offset = static_cast<size_t>(k / kLanes) * kStepBytes;
    if (prefetch != nullptr) {
      for (size_t line = 0; line < kStepBytes; line += kCacheLine) PrefetchLine(prefetch + offset + line, kHint);
    }
    const VecF xv = Load(x + k);
    const uint8_t* step = group + offset;
    for (int r = 0; r < kRowGroupRows; ++r) acc[r] = Fma(Format::Load(step + r * Format::kVectorBytes, 0), xv, acc[r]);
  }
  for (int r = 0; r < kRowGroupRows; ++r) result[r] = ReduceAdd(acc[r]);
}

// Decode over groups of rows: each thread reads its claims (ForEachClaim) as one sequential
// stream of groups, asking for its bytes kRowGroupPrefetchBytes ahead with DecodePrefetchHint.
// One stream a thread, against the two streams of groups read side by side before (8
// accumulators in flight instead of 4), decode steps of the medium model with the two
// alternating step by step in one process, medians of 40 steps, 48 rounds over some ten minutes
// (Zen 5, 2 cores; docs/engine-benchmarks.md): one stream faster in 39, by 3% (median) where
// the steps read under 51 GB/s and 1% above it; the random `large` model (574 M parameters),
// F16 19.12 / 18.46, 26.96 / 26.39, 18.47 / 17.94 ms, BF16 17.89 / 17.27, 24.22 / 23.13 (two /
// one). 3 / 6 / 12 KB ahead, 28 rounds: 6 KB fastest in 13, 12 KB 0.5% slower (median), 3 KB
// 1.3% slower and 8-12% slower in the fast minutes. Before that: two row streams a thread read
// 85 / 80 / 91 / 89% of the probe in the medium model's 49 F16 matrices, two streams of groups
// 91 / 86 / 95 / 91%; 8-row groups made 16-token forwards up to 12% slower (their row blocks
// read half of every group's lines); non-temporal 6 KB ahead beat into L2 at 6, 12 and 24 KB by
// 2-10% and no prefetch by 4-10%.
constexpr size_t kRowGroupPrefetchBytes = 6144;
static_assert(kRowGroupPrefetchBytes <= kMaxNonTemporalBytesAhead,
              "decode's non-temporal lines must still be in L1 when read");

template <typename Format, PrefetchHint kHint>
void DecodeGroupRun(const uint8_t* w, size_t group_bytes, size_t matrix_bytes, int64_t first, int64_t count,
                    int64_t n_in, absl::Span<const OutputPart> parts, const float* x, const float* bias) {
  for (int64_t g = first; g < first + count; ++g) {
    const size_t ahead = static_cast<size_t>(g) * group_bytes + kRowGroupPrefetchBytes;
    // Near W's end: no prefetch.
    const char* prefetch = ahead + group_bytes <= matrix_bytes ? reinterpret_cast<const char*>(w + ahead) : nullptr;
    float result[kRowGroupRows];
    GroupDecodeTile<Format, kHint>(w + g * group_bytes, n_in, x, prefetch, result);
    for (int r = 0; r < kRowGroupRows; ++r) {
      const RowOutput o = OutputOf(parts, bias, g * kRowGroupRows + r);
      o.out[o.col] = result[r] + o.bias;
    }
  }
}

template <typename Format, PrefetchHint kHint>
void DecodeRowGroupsWith(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_in,
                         absl::Span<const OutputPart> parts, const float* x, const float* bias) {
  const int64_t n_groups = n_rows / kRowGroupRows;
  const size_t group_bytes = row_bytes * kRowGroupRows;
  const size_t matrix_bytes = static_cast<size_t>(n_groups) * group_bytes;
  ForEachClaim(n_groups, WorthParallel(4 * n_rows * n_in), [&](int64_t first, int64_t count) {
    DecodeGroupRun<Format, kHint>(w, group_bytes, matrix_bytes, first, count, n_in, parts, x, bias);
  });
}

template <typename Format>
void DecodeRowGroups(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_in,
                     absl::Span<const OutputPart> parts, const float* x, const float* bias) {
  if (DecodePrefetchHint() == PrefetchHint::kNonTemporal) {
    return DecodeRowGroupsWith<Format, PrefetchHint::kNonTemporal>(w, row_bytes, n_rows, n_in, parts, x, bias);
  }
  DecodeRowGroupsWith<Format, PrefetchHint::kL2>(w, row_bytes, n_rows, n_in, parts, x, bias);
}

template <typename Format>
void MatMulTyped(const void* weights, size_t row_bytes, int64_t n_rows, int64_t n_in,
                 absl::Span<const OutputPart> parts, const std::vector<const float*>& x_rows, const float* bias) {
  const auto* w = static_cast<const uint8_t*>(weights);
  const int64_t n_tokens = static_cast<int64_t>(x_rows.size());
  if constexpr (RowsOf<Format>::kInGroups) {
    if (n_tokens == 1) return DecodeRowGroups<Format>(w, row_bytes, n_rows, n_in, parts, x_rows[0], bias);
  } else if (n_tokens == 1) {
    return ForwardStreams<Format, kDecodeStreams<Format>, 1>(w, row_bytes, n_rows, n_in, parts, x_rows.data(), 1,
                                                             bias);
  }
  if constexpr (kStreamForwardTokens<Format> > 1) {
    if (n_tokens <= kStreamForwardTokens<Format>) {
      if constexpr (RowsOf<Format>::kInGroups) {
        return ForwardRowGroups<Format>(w, row_bytes, n_rows, n_in, parts, x_rows.data(), n_tokens, bias);
      }
      return ForwardStreams<Format, kForwardStreams, kForwardStreamTokens>(w, row_bytes, n_rows, n_in, parts,
                                                                           x_rows.data(), n_tokens, bias);
    }
  }
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
    const int64_t t1 = std::min(n_tokens, t0 + kTokenTile);
    // A quarter of the usual threshold: even the smallest projections of real models stream
    // enough weight bytes for two threads to pay.
    auto token_tiles = [&](auto rb, int64_t row0, const OutputPart& part) {
      constexpr int RB = decltype(rb)::value;
      // Only the first token tile of a block streams its rows from memory; later tiles find them
      // in cache. The block kPrefetchBlocks ahead is asked for by the first tiles in turn
      // (PrefetchBy). W is one contiguous matrix, so the prefetch runs on across parts. In groups
      // of rows (of kRowBlock rows, row_groups.h) a block is a group: the same bytes, in another
      // order.
      const char* prefetch = RowsToPrefetch(w, row_bytes, n_rows, row0, RB);
      RowBlock<Format, RB>(w, row_bytes, n_in, row0, part, x_rows.data(), t0, t1, bias, prefetch,
                           PrefetchBy::kSharedTiles);
    };
    ForEachRowBlock<kRowBlock>(parts, WorthParallel(4 * n_rows * n_in * (t1 - t0)), token_tiles);
  }
}

std::vector<const float*> SelectRows(const Tensor& x, absl::Span<const int32_t> rows) {
  std::vector<const float*> x_rows;
  if (rows.empty()) {
    x_rows.reserve(x.rows);
    for (int64_t t = 0; t < x.rows; ++t) x_rows.push_back(x.row(t));
  } else {
    x_rows.reserve(rows.size());
    for (int32_t r : rows) x_rows.push_back(x.row(r));
  }
  return x_rows;
}

// A matrix read as Upload left it: in groups of rows or row-major.
template <typename Format>
void MatMulAsHeld(const Tensor& w, size_t row_bytes, absl::Span<const OutputPart> parts,
                  const std::vector<const float*>& x_rows, const float* bias) {
  if constexpr (kRowGroupsBuilt) {
    if (w.layout == TensorLayout::kCpuRowGroups) {
      return MatMulTyped<InRowGroups<Format>>(w.data, row_bytes, w.rows, w.cols, parts, x_rows, bias);
    }
  }
  MatMulTyped<Format>(w.data, row_bytes, w.rows, w.cols, parts, x_rows, bias);
}

void Dispatch(const Tensor& w, absl::Span<const OutputPart> parts, const std::vector<const float*>& x_rows,
              const Tensor* bias) {
  const float* bias_data = bias ? bias->f32() : nullptr;
  const size_t row_bytes = DTypeRowBytes(w.dtype, w.cols);
  switch (w.dtype) {
    case DType::kF32: return MatMulAsHeld<F32Weights>(w, row_bytes, parts, x_rows, bias_data);
    case DType::kF16: return MatMulAsHeld<F16Weights>(w, row_bytes, parts, x_rows, bias_data);
    case DType::kBF16: return MatMulAsHeld<BF16Weights>(w, row_bytes, parts, x_rows, bias_data);
    case DType::kQ8_0:
      return MatMulQ8(static_cast<const uint8_t*>(w.data), w.rows, w.cols, parts, x_rows, bias_data);
  }
}

}  // namespace

void MatMul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
            absl::Span<const int32_t> rows) {
  const OutputPart whole{out.f32(), 0, w.rows};
  Dispatch(w, {&whole, 1}, SelectRows(x, rows), bias);
}

void MatMulSplit(const Tensor& x, const Tensor& w, const Tensor* bias, absl::Span<Tensor* const> outs) {
  std::vector<OutputPart> parts;
  int64_t first_row = 0;
  for (Tensor* out : outs) {
    parts.push_back({out->f32(), first_row, out->cols});
    first_row += out->cols;
  }
  Dispatch(w, parts, SelectRows(x, {}), bias);
}

}  // namespace splitspec::engine::cpu
