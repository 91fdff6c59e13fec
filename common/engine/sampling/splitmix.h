// SplitMix64 (Steele, Lea and Flood 2014): the mixer every seeded stream here starts from. The
// xoshiro256** generator (xoshiro256.h) seeds its state words with it, and named or positional
// streams derive their seeds through its finaliser.
#ifndef SPLITSPEC_COMMON_ENGINE_SAMPLING_SPLITMIX_H_
#define SPLITSPEC_COMMON_ENGINE_SAMPLING_SPLITMIX_H_

#include <cstdint>

namespace splitspec::engine {

// SplitMix64's finaliser: nearby inputs, unrelated outputs.
inline uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The next value of the SplitMix64 sequence at *state, advancing it.
inline uint64_t SplitMix64(uint64_t* state) {
  *state += 0x9e3779b97f4a7c15ULL;
  return Mix64(*state);
}

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_SAMPLING_SPLITMIX_H_
