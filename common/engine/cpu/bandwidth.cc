// Read-only streaming bandwidth probe (see bandwidth.h).
#include "common/engine/cpu/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "common/engine/cpu/simd.h"

namespace splitspec::engine::cpu {

double MeasureReadBandwidth(size_t bytes, int repeats) {
  const size_t stride = 4 * kLanes;  // four independent accumulators hide FMA latency
  const size_t n_chunks = bytes / sizeof(float) / stride;
  float* data = static_cast<float*>(std::aligned_alloc(64, n_chunks * stride * sizeof(float)));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n_chunks * stride; ++i) data[i] = static_cast<float>(i & 7);
  double best = 0;
  volatile float sink = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    float total = 0;
#pragma omp parallel reduction(+ : total)
    {
      VecF acc[4] = {Zero(), Zero(), Zero(), Zero()};
#pragma omp for schedule(static)
      for (size_t i = 0; i < n_chunks; ++i) {
        const float* p = data + i * stride;
        for (int j = 0; j < 4; ++j) acc[j] = Fma(Load(p + j * kLanes), Broadcast(1.0f), acc[j]);
      }
      for (int j = 0; j < 4; ++j) total += ReduceAdd(acc[j]);
    }
    sink = sink + total;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(n_chunks * stride * sizeof(float)) / seconds / 1e9);
  }
  std::free(data);
  return best;
}

}  // namespace splitspec::engine::cpu
