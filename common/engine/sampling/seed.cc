// Fresh seeds for unseeded sampled requests (see seed.h).
#include "common/engine/sampling/seed.h"

#include <chrono>
#include <mutex>
#include <random>

#include "common/engine/sampling/sampler.h"
#include "common/engine/sampling/splitmix.h"

namespace splitspec::engine {
namespace {

uint64_t OperatingSystemEntropy() {
  std::random_device device;
  const uint64_t high = device();
  const uint64_t low = device();
  // The clock only matters where random_device is deterministic (some platforms without a
  // hardware source); it keeps two processes from starting on the same stream there.
  const uint64_t clock = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return (high << 32 | (low & 0xFFFFFFFFu)) ^ clock;
}

}  // namespace

uint64_t NamedSeed(uint64_t seed, std::string_view name) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (char c : name) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ull;
  }
  // One SplitMix64 step from seed ^ hash: nearby seeds and names, unrelated results.
  uint64_t state = seed ^ hash;
  return SplitMix64(&state);
}

uint64_t ChooseSeed(std::optional<uint64_t> requested) {
  if (requested.has_value()) return *requested;
  static std::mutex mu;
  static Rng* generator = new Rng(OperatingSystemEntropy());
  std::lock_guard<std::mutex> lock(mu);
  return generator->NextU64();
}

}  // namespace splitspec::engine
