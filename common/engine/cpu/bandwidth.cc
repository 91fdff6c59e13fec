// Read bandwidth ceiling probe (see bandwidth.h).
#include "common/engine/cpu/bandwidth.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>

#include "common/engine/cpu/host_memory.h"
#include "common/engine/cpu/simd.h"

namespace splitspec::engine::cpu {
namespace {

// Each step of a stream reads kUnroll vectors into as many accumulators (hides FMA latency).
constexpr int kUnroll = 4;
constexpr size_t kChunkFloats = kUnroll * kLanes;
constexpr size_t kChunkBytes = kChunkFloats * sizeof(float);
// Prefetch distance, measured best of 1, 4 and 16 KB on the prefetched single stream.
constexpr size_t kPrefetchBytes = 4096;

enum class Hint { kNone, kL2, kNonTemporal };

template <Hint kHint>
inline void PrefetchAhead(const float* p) {
  const char* ahead = reinterpret_cast<const char*>(p) + kPrefetchBytes;
  for (size_t line = 0; line < kChunkBytes; line += 64) {
    if constexpr (kHint == Hint::kL2) PrefetchToL2(ahead + line);
    if constexpr (kHint == Hint::kNonTemporal) __builtin_prefetch(ahead + line, /*rw=*/0, /*locality=*/0);
  }
}

// One timed pass, GB/s: the threads split the chunks into contiguous ranges, and each thread
// reads its range as kStreams equal parts side by side (chunk i of every part, then i + 1).
template <int kStreams, Hint kHint>
double TimedPass(const float* data, size_t n_chunks, volatile float& sink) {
  const auto start = std::chrono::steady_clock::now();
  float total = 0;
  size_t chunks_read = 0;
#pragma omp parallel reduction(+ : total, chunks_read)
  {
    const size_t n_threads = static_cast<size_t>(omp_get_num_threads());
    const size_t thread = static_cast<size_t>(omp_get_thread_num());
    const size_t begin = n_chunks * thread / n_threads;
    const size_t per_stream = (n_chunks * (thread + 1) / n_threads - begin) / kStreams;
    VecF acc[kUnroll];
    for (VecF& a : acc) a = Zero();
    const VecF one = Broadcast(1.0f);
    for (size_t i = 0; i < per_stream; ++i) {
      for (int s = 0; s < kStreams; ++s) {
        const float* p = data + (begin + s * per_stream + i) * kChunkFloats;
        if constexpr (kHint != Hint::kNone) PrefetchAhead<kHint>(p);
        for (int j = 0; j < kUnroll; ++j) acc[j] = Fma(Load(p + j * kLanes), one, acc[j]);
      }
    }
    for (const VecF& a : acc) total += ReduceAdd(a);
    chunks_read += per_stream * kStreams;  // a range's remainder (< kStreams chunks) is not read
  }
  sink = sink + total;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(chunks_read * kChunkBytes) / seconds / 1e9;
}

struct Kernel {
  std::string_view name;
  double (*pass)(const float*, size_t, volatile float&);
};

constexpr Kernel kKernels[] = {
    {"1 stream", TimedPass<1, Hint::kNone>},
    {"1 stream, prefetch L2", TimedPass<1, Hint::kL2>},
    {"1 stream, prefetch NTA", TimedPass<1, Hint::kNonTemporal>},
    {"4 streams", TimedPass<4, Hint::kNone>},
    {"4 streams, prefetch L2", TimedPass<4, Hint::kL2>},
    {"8 streams", TimedPass<8, Hint::kNone>},
    {"8 streams, prefetch L2", TimedPass<8, Hint::kL2>},
};

void PickBest(ReadCeiling& c) {
  c.gb_per_s = 0;
  for (const ReadKernelResult& k : c.kernels) {
    if (k.gb_per_s > c.gb_per_s) {
      c.gb_per_s = k.gb_per_s;
      c.best_kernel = k.name;
    }
  }
}

}  // namespace

ReadProbe::ReadProbe(size_t bytes) : n_chunks_(std::max<size_t>(1, bytes / kChunkBytes)) {
  // Prefetches near the end of a range run up to kPrefetchBytes past it: allocate that slack.
  const size_t n_floats = n_chunks_ * kChunkFloats + kPrefetchBytes / sizeof(float);
  buffer_bytes_ = n_floats * sizeof(float);
  // The same kind of memory the weights live in (host_memory.h), or the probe would not bound them.
  data_ = static_cast<float*>(AllocateHostBuffer(buffer_bytes_));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n_floats; ++i) data_[i] = static_cast<float>(i & 7);
}

ReadProbe::~ReadProbe() {
  FreeHostBuffer(data_, buffer_bytes_);
  if (evict_ != nullptr) FreeHostBuffer(evict_, evict_bytes_);
}

ReadCeiling ReadProbe::Pass() {
  ReadCeiling ceiling;
  for (const Kernel& kernel : kKernels) ceiling.kernels.push_back({kernel.name, kernel.pass(data_, n_chunks_, sink_)});
  PickBest(ceiling);
  return ceiling;
}

ReadCeiling ReadProbe::ColdPass() {
  if (evict_ == nullptr) {
    evict_chunks_ = std::min(n_chunks_, ReadProbe::kMaxEvictBytes / kChunkBytes);
    evict_bytes_ = evict_chunks_ * kChunkBytes + kPrefetchBytes;
    evict_ = static_cast<float*>(AllocateHostBuffer(evict_bytes_));
    if (evict_ == nullptr) return Pass();  // no memory for it: passes back to back
    std::fill(evict_, evict_ + evict_bytes_ / sizeof(float), 1.0f);
  }
  ReadCeiling ceiling;
  for (const Kernel& kernel : kKernels) {
    TimedPass<8, Hint::kNone>(evict_, evict_chunks_, sink_);
    ceiling.kernels.push_back({kernel.name, kernel.pass(data_, n_chunks_, sink_)});
  }
  PickBest(ceiling);
  return ceiling;
}

ReadCeiling MeasureReadCeiling(size_t bytes, int repeats) {
  ReadProbe probe(bytes);
  ReadCeiling ceiling = probe.Pass();
  for (int rep = 1; rep < repeats; ++rep) ceiling = MaxOf(ceiling, probe.Pass());
  return ceiling;
}

size_t KernelWithBestMedian(const std::vector<ReadCeiling>& passes) {
  size_t best = 0;
  double best_median = -1;
  for (size_t k = 0; k < passes.front().kernels.size(); ++k) {
    std::vector<double> readings;
    for (const ReadCeiling& pass : passes) readings.push_back(pass.kernels[k].gb_per_s);
    std::nth_element(readings.begin(), readings.begin() + readings.size() / 2, readings.end());
    if (readings[readings.size() / 2] > best_median) {
      best_median = readings[readings.size() / 2];
      best = k;
    }
  }
  return best;
}

ReadCeiling MaxOf(const ReadCeiling& a, const ReadCeiling& b) {
  ReadCeiling c = a.kernels.size() >= b.kernels.size() ? a : b;
  const ReadCeiling& other = a.kernels.size() >= b.kernels.size() ? b : a;
  for (size_t i = 0; i < other.kernels.size(); ++i) {
    c.kernels[i].gb_per_s = std::max(c.kernels[i].gb_per_s, other.kernels[i].gb_per_s);
  }
  PickBest(c);
  return c;
}

}  // namespace splitspec::engine::cpu
