// Runs the two forwards the reference test compares: the independent PyTorch implementation
// (tests/reference/llama_reference.py, in a child process) and the engine's LlamaModel.
//
// Free functions without shared state: safe to call from any thread.
#ifndef SPLITSPEC_TESTS_REFERENCE_REFERENCE_RUNNER_H_
#define SPLITSPEC_TESTS_REFERENCE_REFERENCE_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/engine/model/llama_model.h"

namespace splitspec::reference {

using Prompt = std::vector<int32_t>;
// Per prompt: (prompt length x vocab) logits, row-major.
using PromptLogits = std::vector<std::vector<float>>;

// Runs `command` through the shell; returns its combined stdout+stderr, or an error carrying
// that output when it exits non-zero.
absl::StatusOr<std::string> RunCommand(const std::string& command);

// FAILED_PRECONDITION with an install hint when `python` cannot import torch.
absl::Status CheckTorch(const std::string& python);

// One model's share of a reference run.
struct ReferenceJob {
  std::string model_dir;
  std::vector<Prompt> prompts;
  int vocab_size = 0;
  // The model's matrix products take int8-rounded inputs, as the engine's --quantize int8 kernel
  // computes (llama_reference.quantize_activations).
  bool int8_activations = false;
};

// Runs the reference script once for all jobs (importing torch costs seconds, so one process
// serves every model), in float64 so that the figure measures the engine's error rather than
// torch's own float32 rounding. `work_dir` receives the exchange files. Result i is job i's.
absl::StatusOr<std::vector<PromptLogits>> RunTorchReference(const std::string& python, const std::string& script,
                                                            const std::vector<ReferenceJob>& jobs,
                                                            const std::string& work_dir);

// The engine's logits for every position of every prompt. All prompts go through one batched
// Forward; with `split_at` > 0 each prompt is fed in two forwards (its first `split_at` tokens,
// then the rest against the cached context), which checks attention over the KV cache.
absl::StatusOr<PromptLogits> RunEngine(const std::string& model_dir, const std::vector<Prompt>& prompts,
                                       int split_at, int* vocab_size,
                                       const engine::ModelLoadOptions& load_options = {});

// max |a - b| over all prompts; -1 when the shapes differ, infinity when any value is NaN.
double MaxAbsDiff(const PromptLogits& a, const PromptLogits& b);

}  // namespace splitspec::reference

#endif  // SPLITSPEC_TESTS_REFERENCE_REFERENCE_RUNNER_H_
