// Uniforms and Box-Muller normals over xoshiro256** (sampling/xoshiro256.h).
#include "common/engine/model/random_weights.h"

#include <cmath>

namespace splitspec::engine {

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
