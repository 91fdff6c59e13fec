// xoshiro256** (Blackman and Vigna 2018) with its four state words seeded through SplitMix64:
// the one generator behind every seeded stream here (the samplers' draws, the random models'
// weights). Small, fast, and identical on every platform, which std:: distributions are not.
#ifndef SPLITSPEC_COMMON_ENGINE_SAMPLING_XOSHIRO256_H_
#define SPLITSPEC_COMMON_ENGINE_SAMPLING_XOSHIRO256_H_

#include <cstdint>

#include "common/engine/sampling/splitmix.h"

namespace splitspec::engine {

// Not thread-safe: one per stream, used by one thread at a time.
class Xoshiro256StarStar {
 public:
  explicit Xoshiro256StarStar(uint64_t seed) {
    for (uint64_t& word : state_) word = SplitMix64(&seed);
  }

  uint64_t Next() {
    const uint64_t result = RotateLeft(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = RotateLeft(state_[3], 45);
    return result;
  }

 private:
  static uint64_t RotateLeft(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t state_[4];
};

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_SAMPLING_XOSHIRO256_H_
