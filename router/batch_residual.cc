#include "router/batch_residual.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace splitspec::router {
namespace {

constexpr int32_t kExactUpTo = 32;      // every batch size its own bucket up to here
constexpr double kBucketsPerOctave = 8;  // then 1/8th of an octave (~9% wider each)
// One observation's ratio is clamped before it is averaged: a step stalled by a page fault or a
// preempted process must not set a bucket's price on its own.
constexpr double kMaxLogRatio = 1.3862943611198906;  // log(4)

}  // namespace

int32_t BatchResidual::BucketStart(double n_batched) {
  const double n = std::max(1.0, n_batched);
  if (n <= kExactUpTo) return static_cast<int32_t>(std::lround(n));
  const double step = std::floor(kBucketsPerOctave * std::log2(n / kExactUpTo));
  const double start = kExactUpTo * std::exp2(step / kBucketsPerOctave);
  return static_cast<int32_t>(std::min(start, 1e9));
}

void BatchResidual::Observe(double n_batched, double predicted, double observed) {
  if (!(predicted > 0) || !(observed > 0) || !std::isfinite(predicted) || !std::isfinite(observed)) {
    return;
  }
  const double log_ratio = std::clamp(std::log(observed / predicted), -kMaxLogRatio, kMaxLogRatio);
  Cell& cell = cells_[BucketStart(n_batched)];
  ++cell.steps;
  const double weight = 1.0 / static_cast<double>(std::min<int64_t>(cell.steps, kMemory));
  cell.mean_log_ratio += weight * (log_ratio - cell.mean_log_ratio);
}

void BatchResidual::Set(double n_batched, double factor) {
  if (!(factor > 0) || !std::isfinite(factor)) return;
  cells_[BucketStart(n_batched)] = Cell{std::log(factor), kMemory};
}

double BatchResidual::Factor(double n_batched) const {
  const int32_t at = BucketStart(n_batched);
  auto learnt = [](const Cell& c) { return c.steps >= kMinObservations; };
  // Nearest learnt bucket at or above `at`, and at or below it.
  auto above = cells_.lower_bound(at);
  while (above != cells_.end() && !learnt(above->second)) ++above;
  auto below = cells_.upper_bound(at);
  bool have_below = false;
  while (below != cells_.begin()) {
    --below;
    if (learnt(below->second)) {
      have_below = true;
      break;
    }
  }
  if (above == cells_.end() && !have_below) return 1.0;
  if (above == cells_.end()) return std::exp(below->second.mean_log_ratio);
  if (!have_below || above->first == at) return std::exp(above->second.mean_log_ratio);
  const double span = above->first - below->first;
  const double t = (at - below->first) / span;
  return std::exp((1 - t) * below->second.mean_log_ratio + t * above->second.mean_log_ratio);
}

nlohmann::json BatchResidual::Describe() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [start, cell] : cells_) {
    out[std::to_string(start)] = {{"factor", std::exp(cell.mean_log_ratio)}, {"steps", cell.steps}};
  }
  return out;
}

}  // namespace splitspec::router
