// Turning logits into tokens: argmax, and temperature / top-k / top-p sampling with a
// per-request seeded RNG whose stream is reproducible across runs and platforms.
#ifndef SPLITSPEC_COMMON_ENGINE_SAMPLING_SAMPLER_H_
#define SPLITSPEC_COMMON_ENGINE_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/engine/sampling/xoshiro256.h"

namespace splitspec::engine {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax)
  int top_k = 0;             // 0 = no top-k cut
  float top_p = 1.0f;        // 1 = no nucleus cut
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
};

// INVALID_ARGUMENT for negative/NaN temperature, top_k < 0, top_p outside (0, 1].
absl::Status ValidateSamplingParams(const SamplingParams& params);

// Index of the largest logit; the lowest index wins ties, so the result is deterministic.
// NaN never wins over a number; -1 for an empty span.
int32_t Argmax(absl::Span<const float> logits);

// Probabilities after temperature, top-k and top-p, normalised to sum 1 (zeros outside the
// kept set). With greedy params: one-hot at Argmax. Computed in a fixed order (deterministic).
std::vector<float> ComputeProbabilities(absl::Span<const float> logits,
                                        const SamplingParams& params);

// A request's draws: xoshiro256** (xoshiro256.h), so that a seed gives the same tokens on every
// platform (std:: distributions do not, so sampling never uses them).
// Not thread-safe: one per request, used by one thread at a time.
class Rng {
 public:
  explicit Rng(uint64_t seed) : generator_(seed) {}
  uint64_t NextU64() { return generator_.Next(); }
  double NextUniform();  // in [0, 1), 53 random bits

 private:
  Xoshiro256StarStar generator_;
};

// Draws an index from `probs` (need not be normalised; must have a positive sum).
// Negative and NaN entries count as 0; returns -1 when nothing has positive mass.
// Consumes exactly one NextUniform() draw.
int32_t SampleFromProbabilities(absl::Span<const float> probs, Rng& rng);

// One token from logits: Argmax for greedy params (no RNG draw), otherwise
// SampleFromProbabilities(ComputeProbabilities(logits, params), rng).
int32_t SampleToken(absl::Span<const float> logits, const SamplingParams& params, Rng& rng);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_SAMPLING_SAMPLER_H_
