// Read-only streaming bandwidth probe (see bandwidth.h).
#include "common/engine/cpu/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "common/engine/cpu/simd.h"

namespace splitspec::engine::cpu {
namespace {

constexpr size_t kStride = 4 * kLanes;  // floats per step: four independent accumulators hide FMA latency
// Prefetch distance of the kPrefetched probe; measured best of 1, 4 and 16 KB.
constexpr size_t kPrefetchBytes = 4096;

// One timed pass: GB/s of summing `n_chunks` steps of kStride floats.
template <bool kPrefetch>
double TimedSum(const float* data, size_t n_chunks, volatile float& sink) {
  const auto start = std::chrono::steady_clock::now();
  float total = 0;
#pragma omp parallel reduction(+ : total)
  {
    VecF acc[4] = {Zero(), Zero(), Zero(), Zero()};
#pragma omp for schedule(static)
    for (size_t i = 0; i < n_chunks; ++i) {
      const float* p = data + i * kStride;
      if (kPrefetch) {
        const char* ahead = reinterpret_cast<const char*>(p) + kPrefetchBytes;
        for (size_t line = 0; line < kStride * sizeof(float); line += 64) PrefetchToL2(ahead + line);
      }
      for (int j = 0; j < 4; ++j) acc[j] = Fma(Load(p + j * kLanes), Broadcast(1.0f), acc[j]);
    }
    for (int j = 0; j < 4; ++j) total += ReduceAdd(acc[j]);
  }
  sink = sink + total;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(n_chunks * kStride * sizeof(float)) / seconds / 1e9;
}

}  // namespace

double MeasureReadBandwidth(size_t bytes, int repeats, ReadProbe probe) {
  const size_t n_chunks = bytes / sizeof(float) / kStride;
  // Prefetches near the end run up to kPrefetchBytes past the last chunk: allocate that slack.
  const size_t n_floats = n_chunks * kStride + kPrefetchBytes / sizeof(float);
  float* data = static_cast<float*>(std::aligned_alloc(64, n_floats * sizeof(float)));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n_floats; ++i) data[i] = static_cast<float>(i & 7);
  double best = 0;
  volatile float sink = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    best = std::max(best, probe == ReadProbe::kPrefetched ? TimedSum<true>(data, n_chunks, sink)
                                                          : TimedSum<false>(data, n_chunks, sink));
  }
  std::free(data);
  return best;
}

}  // namespace splitspec::engine::cpu
