// Seeded random numbers for make-model: xoshiro256** seeded through splitmix64, normals by
// Box-Muller. Deterministic for a seed on every platform (no std:: distributions, whose output
// differs between standard libraries).
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_RANDOM_WEIGHTS_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_RANDOM_WEIGHTS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/engine/sampling/xoshiro256.h"

namespace splitspec::engine {

// Not thread-safe; use one per thread.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) : generator_(seed) {}
  uint64_t Next() { return generator_.Next(); }
  // Uniform in the open interval (0, 1), 53 bits.
  double Uniform();
  // Standard normal.
  double Normal();

 private:
  Xoshiro256StarStar generator_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// `n` values drawn from N(mean, std^2) with a stream seeded by `seed`.
std::vector<float> NormalValues(int64_t n, float mean, float std, uint64_t seed);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_RANDOM_WEIGHTS_H_
