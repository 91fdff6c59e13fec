// Shared by the sampled-output tests: the prompt they speculate on, what each sampled run
// records, and the chi-square check of its first generated tokens against the target's exact
// conditional distributions (computed independently: a separate model load and forward of
// prompt + the sampled prefix).
#ifndef SPLITSPEC_TESTS_UNIT_VERIFIER_DISTRIBUTION_CHECK_H_
#define SPLITSPEC_TESTS_UNIT_VERIFIER_DISTRIBUTION_CHECK_H_

#include <cstdint>
#include <vector>

#include "common/engine/sampling/sampler.h"

namespace splitspec::verifier {

constexpr int32_t kVocab = 512;  // the tiny preset
constexpr int kBatch = 200;      // sessions per prefill / propose / verify batch

// A short prompt followed by the target's own greedy continuation, so that the draft model
// (the target's first layer) agrees with the target often enough for both the accept and the
// reject branches of rejection sampling to shape the output.
std::vector<int32_t> DraftModelPrompt();

// One sampled run: the pending token after prefill (t0), the first two tokens that speculative
// steps produced after it, and the drafter's first proposed token (-1 when it proposed none).
struct Sample {
  int32_t t0 = 0, t1 = 0, t2 = 0;
  int32_t first_draft = -1;
};

// The target's exact distributions p(t1 | prompt, t0) and p(t2 | prompt, t0, t1) for every
// sample, summed over samples (the expected counts before dividing by the sample count).
struct Expected {
  std::vector<double> t1, t2;
};

Expected ExactTargetDistributions(const std::vector<int32_t>& prompt, const std::vector<Sample>& samples,
                                  const engine::SamplingParams& params);
// The same with a context of its own per sample (prompt plus what the request generated before
// t0), for checking tokens further into a generation.
Expected ExactTargetDistributions(const std::vector<std::vector<int32_t>>& contexts,
                                  const std::vector<Sample>& samples, const engine::SamplingParams& params);

// Chi-square p-value of the samples' `field` against the summed expected distribution.
double PValue(const std::vector<Sample>& samples, const std::vector<double>& expected_sum,
              int32_t Sample::*field);

}  // namespace splitspec::verifier

#endif  // SPLITSPEC_TESTS_UNIT_VERIFIER_DISTRIBUTION_CHECK_H_
