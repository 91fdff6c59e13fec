// Shared distribution check (see distribution_check.h).
#include "tests/unit/verifier/distribution_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "common/engine/backend.h"
#include "common/engine/model/llama_model.h"
#include "tests/unit/sampling/chi_square.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec::verifier {

using splitspec::testing::ChiSquarePValue;
using splitspec::testing::GetTestModels;
using splitspec::testing::GreedyReference;

std::vector<int32_t> DraftModelPrompt() {
  const std::vector<int32_t> base = {1, 17, 42, 99, 5, 300};
  std::vector<int32_t> prompt = base;
  const std::vector<int32_t> tail = GreedyReference(GetTestModels().target_dir, base, 26);
  prompt.insert(prompt.end(), tail.begin(), tail.end());
  return prompt;
}

Expected ExactTargetDistributions(const std::vector<int32_t>& prompt, const std::vector<Sample>& samples,
                                  const engine::SamplingParams& params) {
  return ExactTargetDistributions(std::vector<std::vector<int32_t>>(samples.size(), prompt), samples, params);
}

Expected ExactTargetDistributions(const std::vector<std::vector<int32_t>>& contexts,
                                  const std::vector<Sample>& samples, const engine::SamplingParams& params) {
  Expected expected{std::vector<double>(kVocab, 0.0), std::vector<double>(kVocab, 0.0)};
  engine::CpuBackendOptions backend_options;
  backend_options.n_threads = 1;
  std::unique_ptr<engine::Backend> backend = engine::CreateCpuBackend(backend_options);
  auto model = engine::LlamaModel::Load(GetTestModels().target_dir, *backend);
  if (!model.ok()) {
    ADD_FAILURE() << model.status();
    return expected;
  }
  {
    auto kv = (*model)->CreateKvCache(4 * kBatch, 16);
    if (!kv.ok()) {
      ADD_FAILURE() << kv.status();
      return expected;
    }
    for (size_t first = 0; first < samples.size(); first += kBatch) {
      const size_t n = std::min<size_t>(kBatch, samples.size() - first);
      std::vector<engine::SequenceStep> steps;
      for (size_t i = 0; i < n; ++i) {
        const Sample& s = samples[first + i];
        engine::SequenceStep step;
        step.seq = i + 1;
        step.tokens = contexts[first + i];
        const int32_t after_t0 = static_cast<int32_t>(step.tokens.size());
        step.tokens.push_back(s.t0);
        step.tokens.push_back(s.t1);
        step.logit_nodes = {after_t0, after_t0 + 1};
        if (absl::Status st = (*kv)->AddSequence(step.seq); !st.ok()) {
          ADD_FAILURE() << st;
          return expected;
        }
        steps.push_back(std::move(step));
      }
      engine::ForwardResult forward;
      if (absl::Status st = (*model)->Forward(steps, **kv, &forward); !st.ok()) {
        ADD_FAILURE() << st;
        return expected;
      }
      for (size_t i = 0; i < n; ++i) {
        const std::vector<float> p1 =
            engine::ComputeProbabilities(absl::MakeConstSpan(forward.Row(2 * i), kVocab), params);
        const std::vector<float> p2 =
            engine::ComputeProbabilities(absl::MakeConstSpan(forward.Row(2 * i + 1), kVocab), params);
        for (int32_t j = 0; j < kVocab; ++j) {
          expected.t1[j] += p1[j];
          expected.t2[j] += p2[j];
        }
        (*kv)->Release(i + 1);
      }
    }
  }
  model->reset();
  return expected;
}

double PValue(const std::vector<Sample>& samples, const std::vector<double>& expected_sum,
              int32_t Sample::*field) {
  std::vector<int64_t> counts(kVocab, 0);
  for (const Sample& s : samples) ++counts[s.*field];
  std::vector<double> expected(expected_sum);
  for (double& e : expected) e /= static_cast<double>(samples.size());
  return ChiSquarePValue(counts, expected);
}

}  // namespace splitspec::verifier
