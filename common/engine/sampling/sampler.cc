// Sampling implementation. Every reduction runs in double in a fixed index order, and every
// ordering of tokens breaks ties by the lower index, so the same logits and seed give the same
// token on every platform and thread count.
#include "common/engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace splitspec::engine {
namespace {

// A logit that can carry probability mass: NaN and -inf never do.
inline bool Usable(float logit) {
  return !std::isnan(logit) && logit != -std::numeric_limits<float>::infinity();
}

std::vector<float> OneHot(size_t n, int32_t index) {
  std::vector<float> out(n, 0.0f);
  if (index >= 0) out[index] = 1.0f;
  return out;
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& params) {
  if (std::isnan(params.temperature) || params.temperature < 0.0f ||
      std::isinf(params.temperature)) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be a finite value >= 0, got ", params.temperature));
  }
  if (params.top_k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0, got ", params.top_k));
  }
  if (std::isnan(params.top_p) || params.top_p <= 0.0f || params.top_p > 1.0f) {
    return absl::InvalidArgumentError(absl::StrCat("top_p must be in (0, 1], got ", params.top_p));
  }
  return absl::OkStatus();
}

int32_t Argmax(absl::Span<const float> logits) {
  if (logits.empty()) return -1;
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) continue;  // NaN never wins over a number
    // Strict '>' keeps the lowest index among equal maxima.
    if (best < 0 || logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best < 0 ? 0 : best;
}

std::vector<float> ComputeProbabilities(absl::Span<const float> logits,
                                        const SamplingParams& params) {
  const size_t n = logits.size();
  if (n == 0) return {};
  if (params.greedy()) return OneHot(n, Argmax(logits));

  // Candidates in increasing index order (the summation order below).
  std::vector<int32_t> kept;
  kept.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (Usable(logits[i])) kept.push_back(static_cast<int32_t>(i));
  }
  if (kept.empty()) return OneHot(n, Argmax(logits));

  // Top-k on the logits (dividing by a positive temperature keeps the order). A strict total
  // order (value, then lower index) makes the kept set unique even with ties.
  auto ranks_higher = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < kept.size()) {
    std::nth_element(kept.begin(), kept.begin() + (params.top_k - 1), kept.end(), ranks_higher);
    kept.resize(params.top_k);
    std::sort(kept.begin(), kept.end());
  }

  // Softmax of logits / temperature over the kept set, in double. The maximum is subtracted
  // BEFORE dividing by the temperature: the largest logit then weighs exactly exp(0) = 1 for
  // any temperature. (Scaling first, then subtracting, breaks at tiny temperatures such as
  // 1e-20: the scaled logits are ~1e20, and a fused multiply-add in `z - max_z` leaves a
  // rounding residue of thousands, whose exp is 0 or inf.)
  const double inv_t = 1.0 / static_cast<double>(params.temperature);
  double max_logit = -std::numeric_limits<double>::infinity();
  for (int32_t i : kept) max_logit = std::max(max_logit, static_cast<double>(logits[i]));
  std::vector<double> weight(n, 0.0);
  double sum = 0.0;
  for (int32_t i : kept) {
    const double logit = static_cast<double>(logits[i]);
    // With +inf logits the limit distribution is uniform over the +inf entries.
    const double w = std::isinf(max_logit) ? (logit == max_logit ? 1.0 : 0.0)
                                           : std::exp((logit - max_logit) * inv_t);
    weight[i] = w;
    sum += w;
  }

  // Top-p: the shortest prefix of the probability-sorted kept set whose mass reaches top_p.
  if (params.top_p < 1.0f) {
    std::vector<int32_t> order = kept;
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return weight[a] > weight[b] || (weight[a] == weight[b] && a < b);
    });
    const double target = static_cast<double>(params.top_p) * sum;
    double cumulative = 0.0;
    size_t n_keep = 0;
    while (n_keep < order.size()) {
      cumulative += weight[order[n_keep++]];
      if (cumulative >= target) break;
    }
    for (size_t j = n_keep; j < order.size(); ++j) weight[order[j]] = 0.0;
    sum = 0.0;
    for (int32_t i : kept) sum += weight[i];
  }

  std::vector<float> probs(n, 0.0f);
  for (int32_t i : kept) probs[i] = static_cast<float>(weight[i] / sum);
  return probs;
}

double Rng::NextUniform() {
  return static_cast<double>(NextU64() >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

int32_t SampleFromProbabilities(absl::Span<const float> probs, Rng& rng) {
  const double u = rng.NextUniform();
  double total = 0.0;
  for (float p : probs) {
    if (p > 0.0f) total += p;  // false for NaN too
  }
  if (!(total > 0.0) || std::isinf(total)) return -1;
  // Inverse CDF in index order. The last positive entry absorbs rounding at the top end.
  const double threshold = u * total;
  double cumulative = 0.0;
  int32_t last_positive = -1;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (!(probs[i] > 0.0f)) continue;
    cumulative += probs[i];
    last_positive = static_cast<int32_t>(i);
    if (threshold < cumulative) return last_positive;
  }
  return last_positive;
}

int32_t SampleToken(absl::Span<const float> logits, const SamplingParams& params, Rng& rng) {
  if (params.greedy()) return Argmax(logits);
  return SampleFromProbabilities(ComputeProbabilities(logits, params), rng);
}

}  // namespace splitspec::engine
