// The machine's read bandwidth ceiling: the yardstick for memory-bound decode.
//
// One read kernel is not a ceiling. A core's bandwidth is bounded by the cache misses it keeps in
// flight, so how many independent streams a thread reads, how far ahead it prefetches and with
// which hint all change what it reaches, and which variant wins differs between machines (on one
// of ours the prefetched sum read far faster than the plain one; elsewhere a decode kernel read
// weights faster than a plain sum). So the probe runs several kernels and takes the best: decode
// weight reads are then reported as a share of something the machine was seen to do.
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_BANDWIDTH_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_BANDWIDTH_H_

#include <cstddef>
#include <string_view>
#include <vector>

namespace splitspec::engine::cpu {

struct ReadKernelResult {
  std::string_view name;  // e.g. "4 streams, prefetch L2"
  double gb_per_s = 0;
};

struct ReadCeiling {
  double gb_per_s = 0;                   // the best kernel's figure
  std::string_view best_kernel;
  std::vector<ReadKernelResult> kernels;  // every kernel's best, in a fixed order
};

// A buffer to read and the kernels that read it, for probes taken between other work (bench-engine
// pairs each decode step with a pass, so that both see the machine's bandwidth of that moment).
class ReadProbe {
 public:
  explicit ReadProbe(size_t bytes);  // `bytes` to read, as MeasureReadCeiling
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;

  // One pass of every kernel over the buffer, using the current OpenMP threads.
  ReadCeiling Pass();
  // The same, each kernel's pass right after an untimed read of another buffer as large (at
  // most kMaxEvictBytes), so that it finds none of its buffer in the last-level cache. Passes
  // back to back over one buffer do: where the buffer is not far larger than that cache, part
  // of it survives from one pass to the next (on a 2-core Zen 3 with 32 MiB of L3, 87 MB read
  // at 42.0 GB/s right after itself and at 38.9 right after another 87 MB; at 327 MB the two
  // were level). A decode step taken right after a pass finds none of its weights there either,
  // so this is the pass to pair with it.
  ReadCeiling ColdPass();
  static constexpr size_t kMaxEvictBytes = size_t{256} << 20;

 private:
  float* data_ = nullptr;
  size_t buffer_bytes_ = 0;
  size_t n_chunks_ = 0;
  float* evict_ = nullptr;  // ColdPass's other buffer, allocated by its first call
  size_t evict_bytes_ = 0;
  size_t evict_chunks_ = 0;
  volatile float sink_ = 0;  // keeps the reads from being optimized away
};

// Reads `bytes` (the working set to compare against: a model's weights, or far more than the
// last-level cache for DRAM) with every kernel, using the
// current OpenMP threads; each kernel's figure is its best of `repeats` passes.
ReadCeiling MeasureReadCeiling(size_t bytes, int repeats = 3);

// The kernel whose median over `passes` (ReadProbe::Pass results, at least one) is highest: its
// index in their kernels. Picking each pass's best instead would favour whichever kernel a
// moment of noise lifted, and so set the bar above what any kernel sustains.
size_t KernelWithBestMedian(const std::vector<ReadCeiling>& passes);

// Kernel by kernel maximum of two probes (e.g. before and after a benchmark on a machine whose
// bandwidth drifts with its neighbours). Both must come from MeasureReadCeiling.
ReadCeiling MaxOf(const ReadCeiling& a, const ReadCeiling& b);

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_BANDWIDTH_H_
