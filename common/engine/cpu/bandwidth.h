// The machine's read-only streaming bandwidth, the yardstick for memory-bound decode.
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_BANDWIDTH_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_BANDWIDTH_H_

#include <cstddef>

namespace splitspec::engine::cpu {

// GB/s of a vectorised sum over `bytes` (choose far larger than the last-level cache), using
// the current OpenMP threads; best of `repeats`.
double MeasureReadBandwidth(size_t bytes, int repeats = 5);

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_BANDWIDTH_H_
