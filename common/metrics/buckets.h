// Histogram bucket layouts shared by the metric sets, and a helper that applies many
// observations to one histogram under a single lock (prometheus::Histogram::Observe takes a mutex
// per call; the step loop observes once per request, so it batches them).
//
// Thread safety: the functions are reentrant; ObserveBatch uses thread-local scratch space.
#ifndef SPLITSPEC_COMMON_METRICS_BUCKETS_H_
#define SPLITSPEC_COMMON_METRICS_BUCKETS_H_

#include <cstddef>
#include <vector>

#include "absl/types/span.h"
#include "prometheus/histogram.h"

namespace splitspec::metrics {

// Upper bounds in seconds, +Inf implicit.
const std::vector<double>& TimeToFirstTokenBuckets();  // 1 ms .. 60 s
const std::vector<double>& InterTokenBuckets();        // 1 ms .. 2.5 s
const std::vector<double>& RequestLatencyBuckets();    // 10 ms .. 600 s (e2e and queue time)
const std::vector<double>& StepStageBuckets();         // 50 us .. 2.5 s (router stages, forwards)
const std::vector<double>& StepOverheadBuckets();      // 10 us .. 100 ms (a step beyond its compute)
const std::vector<double>& FramePickupBuckets();      // 2 us .. 10 ms (a step frame's publishing to its reading)
// Powers of two 1 .. 256 (requests per forward).
const std::vector<double>& BatchSizeBuckets();
// Powers of two 1 .. 16384 (tokens per forward).
const std::vector<double>& TokenCountBuckets();
// first, first + 1, ..., last: integer-valued observations such as k or accept length.
std::vector<double> LinearIntegerBuckets(int first, int last);

// Index of the bucket an observation falls in under Prometheus "le" semantics: the first bound
// >= value, or bounds.size() for the +Inf bucket. NaN goes to +Inf.
size_t BucketIndex(const std::vector<double>& bounds, double value);

// A histogram handle together with its bounds, which prometheus::Histogram does not expose.
struct HistogramRef {
  prometheus::Histogram* histogram = nullptr;
  const std::vector<double>* bounds = nullptr;
};

// Observes every value of `values` in `ref` with one lock. Same result as one Observe per value.
void ObserveBatch(const HistogramRef& ref, absl::Span<const double> values);

}  // namespace splitspec::metrics

#endif  // SPLITSPEC_COMMON_METRICS_BUCKETS_H_
