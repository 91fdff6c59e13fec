// xoshiro256** (Blackman & Vigna) with splitmix64 seeding; Box-Muller normals.
#include "common/engine/model/random_weights.h"

#include <cmath>

#include "common/engine/sampling/splitmix.h"

namespace splitspec::engine {
namespace {

uint64_t RotateLeft(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Xoshiro256::Xoshiro256(uint64_t seed) {
  for (uint64_t& word : state_) word = SplitMix64(&seed);
}

uint64_t Xoshiro256::Next() {
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

double Xoshiro256::Uniform() {
  // (k + 0.5) / 2^53 for a 53-bit k: never 0, so log() below is finite.
  return (static_cast<double>(Next() >> 11) + 0.5) * 0x1.0p-53;
}

double Xoshiro256::Normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double radius = std::sqrt(-2.0 * std::log(Uniform()));
  const double angle = 2.0 * M_PI * Uniform();
  spare_ = radius * std::sin(angle);
  has_spare_ = true;
  return radius * std::cos(angle);
}

std::vector<float> NormalValues(int64_t n, float mean, float std, uint64_t seed) {
  Xoshiro256 rng(seed);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = mean + std * static_cast<float>(rng.Normal());
  return values;
}

}  // namespace splitspec::engine
