// Tiny random target/draft model directories for the worker and service tests, made once per
// test process in a temporary directory (removed at exit), plus the target-only greedy
// reference every speculative path must reproduce.
#ifndef SPLITSPEC_TESTS_UNIT_VERIFIER_TEST_MODELS_H_
#define SPLITSPEC_TESTS_UNIT_VERIFIER_TEST_MODELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/engine/dtype.h"

namespace splitspec::testing {

struct TestModels {
  std::string target_dir;  // `make-model --preset tiny` (2 layers, vocab 512, with tokenizer)
  std::string draft_dir;   // its first layer only (`--draft-of target --layers 1`)
};

// Aborts the test binary (with the reason) when the models cannot be made.
const TestModels& GetTestModels();

// Plain greedy generation of `n` tokens after `prompt` on the model in `model_dir`, in-process
// with the engine (a fresh model load and KV cache of `kv_dtype` per call).
std::vector<int32_t> GreedyReference(const std::string& model_dir, const std::vector<int32_t>& prompt, int n,
                                     engine::DType kv_dtype = engine::DType::kF32);

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_UNIT_VERIFIER_TEST_MODELS_H_
