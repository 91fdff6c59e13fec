// The machine's read-only streaming bandwidth, the yardstick for memory-bound decode.
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_BANDWIDTH_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_BANDWIDTH_H_

#include <cstddef>

namespace splitspec::engine::cpu {

enum class ReadProbe {
  // A plain vectorised sum: the usual yardstick (what other engines' "% of bandwidth" use).
  kPlain,
  // The same sum with software prefetch 4 KB ahead. A single core's bandwidth is bounded by
  // the misses it keeps in flight, so on some machines (this project's 2-core EPYC VMs) this
  // reads far faster than kPlain; the matmul kernels prefetch too, so it is the tighter bound.
  kPrefetched,
};

// GB/s of a vectorised sum over `bytes` (choose far larger than the last-level cache), using
// the current OpenMP threads; best of `repeats`.
double MeasureReadBandwidth(size_t bytes, int repeats = 5, ReadProbe probe = ReadProbe::kPlain);

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_BANDWIDTH_H_
