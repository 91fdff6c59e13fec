// What the CPU matmul kernels share: where a run of weight rows writes its outputs, and how the
// row blocks of one call are spread over the threads.
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_MATMUL_PARTS_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_MATMUL_PARTS_H_

#include <omp.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>
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
// Every run of blocks is read upwards (ClaimMeetingInTheMiddle), so the blocks ahead are above.
inline const char* RowsToPrefetch(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t row0, int rb) {
  const int64_t ahead = row0 + kPrefetchBlocks * rb;
  return ahead + rb <= n_rows ? reinterpret_cast<const char*>(w + ahead * row_bytes) : nullptr;
}

// How a kernel asks for the weights it reads next: into L2, or as lines read once (one token's
// forward, which reads each weight once; matmul.cc has the measurements).
enum class PrefetchHint { kL2, kNonTemporal };

// AMD documents its non-temporal prefetches as filling L1 and not L2: a line evicted from L1
// before it is read comes from memory again. So a thread's non-temporal prefetches run at most
// this far ahead of its reads, its streams together: half of the 32 KB L1 of the smallest
// AVX-512 cores measured here.
constexpr size_t kMaxNonTemporalBytesAhead = 16384;

// Whether this is an AMD CPU of family `family` (26: Zen 5).
inline bool IsAmdFamily(unsigned family) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // "AuthenticAMD"
  if (!amd || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  const unsigned base = (eax >> 8) & 0xf, extended = (eax >> 20) & 0xff;
  return (base == 0xf ? base + extended : base) == family;
#else
  (void)family;
  return false;
#endif
}

// The hint one token's forward asks for its weights with. Non-temporal where that was measured
// faster, the Zen 5 (matmul.cc); into L2 elsewhere, as the Zen 4 measured non-temporal lines
// 3-40% slower (docs/engine-benchmarks.md) and no other machine has measured them.
inline PrefetchHint DecodePrefetchHint() {
  static const PrefetchHint hint = IsAmdFamily(26) ? PrefetchHint::kNonTemporal : PrefetchHint::kL2;
  return hint;
}

inline void PrefetchLine(const void* p, PrefetchHint hint) {
  if (hint == PrefetchHint::kNonTemporal) {
    PrefetchNonTemporal(p);
  } else {
    PrefetchToL2(p);
  }
}

// Step `step`'s share of a prefetch (`bytes_per_step` bytes from prefetch + step * bytes_per_step);
// nothing when `prefetch` is nullptr. No effect on results.
inline void PrefetchStep(const char* prefetch, int64_t step, size_t bytes_per_step,
                         PrefetchHint hint = PrefetchHint::kL2) {
  if (prefetch == nullptr) return;
  const char* p = prefetch + step * bytes_per_step;
  for (size_t line = 0; line < bytes_per_step; line += kCacheLine) PrefetchLine(p + line, hint);
}

// A prefetch spread over a kernel's steps (PrefetchStep): from `at` (nullptr: none),
// `bytes_per_step` a step, with `hint`.
struct StepPrefetch {
  const char* at = nullptr;
  size_t bytes_per_step = 0;
  PrefetchHint hint = PrefetchHint::kL2;

  void Step(int64_t step) const { PrefetchStep(at, step, bytes_per_step, hint); }
};

// How a row block's tiles ask for its prefetch (matmul.cc): n_steps k-steps of bytes_per_step
// bytes from `at` (nullptr: nothing), of which each of the block's first `sharers` tiles asks
// for a consecutive 1/sharers, spread evenly over its own steps.
struct BlockPrefetch {
  const char* at = nullptr;
  size_t bytes_per_step = 0;
  int64_t n_steps = 0;
  int sharers = 1;
  PrefetchHint hint = PrefetchHint::kL2;

  // What the block's tile number `tile` asks for (nothing past the sharers).
  StepPrefetch ShareOf(int64_t tile) const {
    if (at == nullptr || tile >= sharers) return {};
    const size_t share = bytes_per_step / sharers;
    return {at + static_cast<size_t>(tile * n_steps) * share, share, hint};
  }
};

// A block's prefetch shared by as many of its n_tiles tiles as there are, up to the largest
// power of two that still gives each at least a cache line a step. (A share rounds down: of a
// bytes_per_step that the sharers do not divide, the last few bytes a step go unasked for.)
inline BlockPrefetch SharedBlockPrefetch(const char* at, size_t bytes_per_step, int64_t n_steps, int64_t n_tiles) {
  BlockPrefetch plan{at, bytes_per_step, n_steps, 1};
  while (plan.sharers * 2 <= n_tiles && bytes_per_step / (plan.sharers * 2) >= kCacheLine) plan.sharers *= 2;
  return plan;
}

// A run of row blocks shared by two threads that claim towards each other: one from its start
// upwards, one from its end downwards, a few blocks at a time until they meet. With a
// static split one thread waited for the other at the end of every projection (a shared
// machine's two cores rarely stream at the same speed; OpenMP's barrier spin held ~13% of the
// threads' time in a BF16 decode profile). Meeting in the middle balances them while each still
// reads one contiguous stream, which a dynamic schedule's interleaved chunks do not (that
// measured 6-78% slower). Medium model, 2 threads, 200 alternating forwards each way, median:
// batch-1 decode int8 4.3% faster, F16 1.5-1.9%, BF16 1.5-2.0%, F32 unchanged; 4-token forward
// int8 13.5%, BF16 3.7%; 16-token forwards within 1% (int8 5% faster).
class alignas(64) MeetingRange {
 public:
  void Reset(int64_t size) {
    size_ = size;
    claimed_.store(0, std::memory_order_relaxed);
  }
  // A walker's first claim: 15/32 of the range (at least kMinClaim blocks), whichever walker
  // comes first, so the two first claims leave 1/16 of it to meet in. Each claim after a
  // walker's first costs a transfer of this line between the cores (the other walker claims
  // from it too), and each of the walker from the end starts a new stream, cold for the
  // prefetchers; with Claim's half of what is left for a first claim too, the walker that came
  // second started with a quarter of the range and made most of the claims. On a Zen 5 (2
  // cores) whose fork/join costs about 0.5 us in some minutes and about 1.1 us in others (its
  // two cores then further apart), the medium model's 49 matrices in turn with one token,
  // 15/32 and half of what is left alternating pass by pass in one process (a harness not
  // kept), the ratio's median over rounds of 24 passes each, three runs of about ten minutes:
  // in the 1.1 us minutes F16 0.979-0.988, BF16 0.979-0.988, F32 0.984-0.990, int8 0.978-0.980
  // (15/32 faster in 67-83% of those rounds); in the others 0.995-1.002. 7/16, 29/64 and 31/64
  // measured within about half a percent of 15/32; F32 forwards of 2 and 4 tokens and BF16 ones
  // of 8 level (eight rounds each).
  int64_t FirstClaim() { return Grant(std::max(kMinClaim, size_ * 15 / 32)); }

  // Grants up to half of what is left (at least kMinClaim blocks): few claims, and the last
  // ones small, so the two walkers finish within a block or two of each other. Returns 0 once
  // the range is used up. Blocks granted never overlap: their total is at most size.
  // Half rather than a quarter: each claim of the walker from the end starts a new stream, cold
  // for the prefetchers, and a quarter made about twice as many. Zen 5 (2 cores), the medium
  // model's 49 matrices in turn with one token, the two alternating pass by pass (a harness not
  // kept), medians of 80-150 passes: int8 1.700 -> 1.664 ms and 1.809 -> 1.764, F16 3.323 ->
  // 3.220 and 3.553 -> 3.469, BF16 2.884 -> 2.853 and 2.886 -> 2.840, F32 level (5.535 / 5.615,
  // 5.651 / 5.605).
  int64_t Claim() {
    const int64_t left = size_ - claimed_.load(std::memory_order_relaxed);
    return Grant(std::max(kMinClaim, left / 2));
  }

 private:
  static constexpr int64_t kMinClaim = 2;

  // Up to `want` blocks of what is left; 0 once the range is used up.
  int64_t Grant(int64_t want) {
    const int64_t before = claimed_.fetch_add(want, std::memory_order_relaxed);
    return before >= size_ ? 0 : std::min(want, size_ - before);
  }

  int64_t size_ = 0;
  std::atomic<int64_t> claimed_{0};
};

// Threads pair up on consecutive ranges of [0, n), a range's share of n in proportion to its
// threads (an odd one out has a range of its own): [first, second) of `pair` in a team of
// n_threads.
inline std::pair<int64_t, int64_t> PairRange(int64_t n, int pair, int n_threads) {
  return {n * (2 * pair) / n_threads, n * std::min(2 * pair + 2, n_threads) / n_threads};
}

// Resets ranges[0 .. (n_threads + 1) / 2) for a team of n_threads sharing [0, n).
inline void PlanMeetingRanges(int64_t n, int n_threads, MeetingRange* ranges) {
  for (int pair = 0; 2 * pair < n_threads; ++pair) {
    const auto [first, end] = PairRange(n, pair, n_threads);
    ranges[pair].Reset(end - first);
  }
}

// Calls claim(first, count) for runs [first, first + count) that together cover [0, n) once,
// from the threads of the enclosing parallel region, whose team size `ranges` was planned for
// (PlanMeetingRanges): in each pair's range the even thread claims runs from the start upwards
// and the odd one runs from the end downwards until they meet; an odd one out claims its range
// alone, upwards. Every run is read upwards, the odd thread's too: its claims come down from the
// end, but inside each it reads ascending addresses. Rows read in descending order, each a
// short forward stream just below the last, lose the hardware prefetchers: on a Zen 3 (AVX2,
// where decode issues no software prefetch), a standalone F16 kernel over 96 matrices of
// 1024 x 768, two threads each reading half, read 8.9 GB/s with the second thread's rows in
// descending order against 15.4 with both ascending. In the engine (1-token MatMul over 64 such
// matrices in turn, three alternating runs) the descending second walker cost F16 16.4 / 14.5 /
// 17.0 GB/s against 21.7 / 23.0 / 20.8 ascending, BF16 13.2 / 14.9 / 14.4 against 22.6 / 20.3 /
// 22.4; batch-1 decode of the medium model: docs/engine-benchmarks.md.
template <typename ClaimFn>
void ClaimMeetingInTheMiddle(int64_t n, MeetingRange* ranges, ClaimFn&& claim) {
  const int thread = omp_get_thread_num();
  const int pair = thread / 2;
  const bool claims_from_the_end = thread % 2 == 1;
  auto [low, high] = PairRange(n, pair, omp_get_num_threads());
  MeetingRange& range = ranges[pair];
  for (int64_t granted = range.FirstClaim(); granted > 0; granted = range.Claim()) {
    if (claims_from_the_end) {
      high -= granted;
      claim(high, granted);
    } else {
      claim(low, granted);
      low += granted;
    }
  }
}

// Calls visit(index) for the indices of the run [first, first + count), upwards.
template <typename VisitFn>
inline void VisitRun(int64_t first, int64_t count, VisitFn&& visit) {
  for (int64_t i = first; i < first + count; ++i) visit(i);
}

// Calls visit(index) for every index in [0, n) once, as ClaimMeetingInTheMiddle shares them
// out, each run's indices upwards.
template <typename VisitFn>
void VisitMeetingInTheMiddle(int64_t n, MeetingRange* ranges, VisitFn&& visit) {
  ClaimMeetingInTheMiddle(n, ranges, [&](int64_t first, int64_t count) { VisitRun(first, count, visit); });
}

// Calls claim(first, count) for runs that together cover [0, n) once: shared out in
// one parallel region (a fork/join per projection would cost more than a small projection's
// compute) by ClaimMeetingInTheMiddle, or as one run on this thread when `parallel` is unset or
// there is one thread.
template <typename ClaimFn>
void ForEachClaim(int64_t n, bool parallel, ClaimFn&& claim) {
  const int max_threads = omp_get_max_threads();
  if (!parallel || max_threads == 1) {
    if (n > 0) claim(int64_t{0}, n);
    return;
  }
  // The ranges are set up here rather than inside the region, which would cost every
  // projection one more barrier; they are planned for max_threads, and a team that came out
  // smaller (OpenMP may give fewer) splits [0, n) statically instead.
  thread_local std::vector<MeetingRange> storage;  // shared with the workers by pointer
  if (storage.size() < static_cast<size_t>(max_threads)) storage = std::vector<MeetingRange>(max_threads);
  MeetingRange* ranges = storage.data();
  PlanMeetingRanges(n, max_threads, ranges);
#pragma omp parallel num_threads(max_threads)
  {
    const int n_threads = omp_get_num_threads();
    if (n_threads == max_threads) {
      ClaimMeetingInTheMiddle(n, ranges, claim);
    } else {
      const int thread = omp_get_thread_num();
      const int64_t first = n * thread / n_threads;
      const int64_t end = n * (thread + 1) / n_threads;
      if (end > first) claim(first, end - first);
    }
  }
}

// Calls block(std::integral_constant<int, RB>, row0, part) for every run of rows: the full
// blocks of kRowBlock rows of all parts form one index space, shared out by ForEachClaim and
// visited upwards in each run; the rows left at the end of a part
// (< kRowBlock) then run serially with RB = 1. Every output element has one owner, whichever
// thread it is, so threading never changes a result.
template <int kRowBlock, typename BlockFn>
void ForEachRowBlock(absl::Span<const OutputPart> parts, bool parallel, BlockFn&& block) {
  int64_t n_blocks = 0;
  for (const OutputPart& part : parts) n_blocks += part.n_cols / kRowBlock;
  auto visit = [&](int64_t index) {
    int64_t local = index;
    size_t p = 0;
    while (local >= parts[p].n_cols / kRowBlock) local -= parts[p++].n_cols / kRowBlock;
    block(std::integral_constant<int, kRowBlock>{}, parts[p].first_row + local * kRowBlock, parts[p]);
  };
  ForEachClaim(n_blocks, parallel, [&](int64_t first, int64_t count) { VisitRun(first, count, visit); });
  for (const OutputPart& part : parts) {
    for (int64_t col = part.n_cols / kRowBlock * kRowBlock; col < part.n_cols; ++col) {
      block(std::integral_constant<int, 1>{}, part.first_row + col, part);
    }
  }
}

// out = x W^T (+ bias) for a Q8_0 W (dtype.h) of n_rows x n_in in groups (q8_groups.h), over
// tokens x_rows.
void MatMulQ8(const uint8_t* w, int64_t n_rows, int64_t n_in, absl::Span<const OutputPart> parts,
              const std::vector<const float*>& x_rows, const float* bias);

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_MATMUL_PARTS_H_
