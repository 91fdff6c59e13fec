// Test model directories and the greedy reference (see test_models.h).
#include "tests/unit/verifier/test_models.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/engine/backend.h"
#include "common/engine/generation/generate.h"
#include "common/engine/model/draft_maker.h"
#include "common/engine/model/llama_model.h"
#include "common/engine/model/model_maker.h"
#include "tests/support/scoped_temp_dir.h"

namespace splitspec::testing {
namespace {

void Die(const std::string& what) {
  std::fprintf(stderr, "test models: %s\n", what.c_str());
  std::abort();
}

TestModels MakeTestModels() {
  // Removed when the test process exits.
  const std::string& root = ProcessTempDir("splitspec-models-");
  TestModels models;
  models.target_dir = root + "/target";
  models.draft_dir = root + "/draft";
  engine::MakeModelOptions options;
  options.preset = "tiny";
  options.out_dir = models.target_dir;
  options.seed = 7;
  if (absl::Status s = engine::MakeModel(options); !s.ok()) Die(std::string(s.message()));
  if (absl::Status s = engine::MakeDraftModel(models.target_dir, 1, models.draft_dir); !s.ok()) {
    Die(std::string(s.message()));
  }
  return models;
}

}  // namespace

const TestModels& GetTestModels() {
  static const TestModels* models = new TestModels(MakeTestModels());
  return *models;
}

std::vector<int32_t> GreedyReference(const std::string& model_dir, const std::vector<int32_t>& prompt, int n,
                                     engine::DType kv_dtype) {
  std::unique_ptr<engine::Backend> backend = engine::CreateCpuBackend();
  auto model = engine::LlamaModel::Load(model_dir, *backend);
  if (!model.ok()) Die(std::string(model.status().message()));
  auto kv = (*model)->CreateKvCache(256, 16, kv_dtype);
  if (!kv.ok()) Die(std::string(kv.status().message()));
  engine::GenerateOptions options;
  options.max_tokens = n;
  auto tokens = engine::GenerateTokens(**model, **kv, prompt, options);
  if (!tokens.ok()) Die(std::string(tokens.status().message()));
  kv->reset();
  model->reset();
  return *tokens;
}

}  // namespace splitspec::testing
