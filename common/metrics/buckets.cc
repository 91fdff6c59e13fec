// Bucket layouts and batched histogram observation.
#include "common/metrics/buckets.h"

#include <algorithm>
#include <cmath>

namespace splitspec::metrics {
namespace {

std::vector<double> PowersOfTwo(int n) {
  std::vector<double> bounds;
  for (int i = 0; i < n; ++i) bounds.push_back(std::ldexp(1.0, i));
  return bounds;
}

}  // namespace

const std::vector<double>& TimeToFirstTokenBuckets() {
  static const auto* const kBounds = new std::vector<double>{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0};
  return *kBounds;
}

const std::vector<double>& InterTokenBuckets() {
  static const auto* const kBounds = new std::vector<double>{
      0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5};
  return *kBounds;
}

const std::vector<double>& RequestLatencyBuckets() {
  static const auto* const kBounds =
      new std::vector<double>{0.01, 0.025, 0.05, 0.1,  0.25, 0.5,   1.0,   2.5,
                              5.0,  10.0,  20.0, 30.0, 60.0, 120.0, 300.0, 600.0};
  return *kBounds;
}

const std::vector<double>& StepStageBuckets() {
  static const auto* const kBounds =
      new std::vector<double>{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                              0.025,   0.05,   0.1,     0.25,   0.5,   1.0,    2.5};
  return *kBounds;
}

const std::vector<double>& StepOverheadBuckets() {
  // Fine around 100 us, where a step's orchestration on one host sits.
  static const auto* const kBounds =
      new std::vector<double>{0.00001, 0.000025, 0.00005, 0.000075, 0.0001, 0.00015, 0.0002, 0.0003,
                              0.0005,  0.00075,  0.001,   0.0025,   0.005,  0.01,    0.025,  0.1};
  return *kBounds;
}

const std::vector<double>& FramePickupBuckets() {
  // A polling reader has a frame within a few microseconds, a sleeping one on a virtual machine
  // within one or two hundred: the buckets part the two.
  static const auto* const kBounds =
      new std::vector<double>{0.000002, 0.000005, 0.00001, 0.00002, 0.00005, 0.0001, 0.0002,
                              0.0005,   0.001,    0.002,   0.005,   0.01};
  return *kBounds;
}

const std::vector<double>& BatchSizeBuckets() {
  static const auto* const kBounds = new std::vector<double>(PowersOfTwo(9));
  return *kBounds;
}

const std::vector<double>& TokenCountBuckets() {
  static const auto* const kBounds = new std::vector<double>(PowersOfTwo(15));
  return *kBounds;
}

std::vector<double> LinearIntegerBuckets(int first, int last) {
  std::vector<double> bounds;
  for (int v = first; v <= last; ++v) bounds.push_back(v);
  return bounds;
}

size_t BucketIndex(const std::vector<double>& bounds, double value) {
  if (std::isnan(value)) return bounds.size();
  return static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) -
                             bounds.begin());
}

void ObserveBatch(const HistogramRef& ref, absl::Span<const double> values) {
  if (values.empty()) return;
  // ObserveMultiple wants a std::vector; a thread-local one avoids an allocation per call.
  thread_local std::vector<double> increments;
  increments.assign(ref.bounds->size() + 1, 0.0);
  double sum = 0.0;
  for (double v : values) {
    increments[BucketIndex(*ref.bounds, v)] += 1.0;
    sum += v;
  }
  ref.histogram->ObserveMultiple(increments, sum);
}

}  // namespace splitspec::metrics
