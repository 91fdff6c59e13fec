// A sequence's logits must be bit-identical whether it runs alone or batched with 1..7 other
// sequences feeding different numbers of tokens (chains and trees).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "tests/unit/engine/test_model.h"

namespace splitspec::engine {
namespace {

using testing::LoadTinyModel;
using testing::RandomTokens;

struct Work {
  std::vector<int32_t> context;
  SequenceStep step;  // seq filled per run
};

// Parameter: the KV cache's dtype.
class BatchInvarianceTest : public ::testing::TestWithParam<DType> {};

TEST_P(BatchInvarianceTest, LogitsDoNotDependOnBatchCompanions) {
  testing::TestModelSpec spec;
  spec.kv_dtype = GetParam();
  testing::LoadedModel m = LoadTinyModel(spec, 1024);
  const int vocab = m.model->config().vocab_size;
  std::mt19937_64 rng(5);
  std::vector<Work> work(8);
  for (int i = 0; i < 8; ++i) {
    work[i].context = RandomTokens(1 + static_cast<int>(rng() % 50), vocab, rng());
    const int n = 1 + static_cast<int>(rng() % 9);
    work[i].step.tokens = RandomTokens(n, vocab, rng());
    if (i % 2 == 1) {  // odd entries are trees
      for (int j = 0; j < n; ++j) work[i].step.parents.push_back(static_cast<int32_t>(rng() % (j + 1)) - 1);
    }
    for (int j = 0; j < n; ++j) work[i].step.logit_nodes.push_back(j);
  }
  SeqId next_seq = 1;
  // Runs entries [0, batch) together (contexts prefilled together too) and returns entry 0's logits.
  auto run = [&](int batch) {
    std::vector<SequenceStep> prefill, steps;
    for (int i = 0; i < batch; ++i) {
      const SeqId seq = next_seq++;
      EXPECT_TRUE(m.kv->AddSequence(seq).ok());
      prefill.push_back(SequenceStep{seq, work[i].context, {}, {}});
      SequenceStep step = work[i].step;
      step.seq = seq;
      steps.push_back(step);
    }
    ForwardResult ignored, result;
    EXPECT_TRUE(m.model->Forward(prefill, *m.kv, &ignored).ok());
    EXPECT_TRUE(m.model->Forward(steps, *m.kv, &result).ok());
    for (const SequenceStep& s : steps) m.kv->Release(s.seq);
    const size_t n = work[0].step.logit_nodes.size() * vocab;
    return std::vector<float>(result.logits.begin(), result.logits.begin() + n);
  };
  const std::vector<float> alone = run(1);
  for (int batch = 2; batch <= 8; ++batch) {
    const std::vector<float> batched = run(batch);
    ASSERT_EQ(std::memcmp(alone.data(), batched.data(), alone.size() * sizeof(float)), 0) << "batch " << batch;
  }
}

INSTANTIATE_TEST_SUITE_P(KvDTypes, BatchInvarianceTest, ::testing::Values(DType::kF32, DType::kF16));

}  // namespace
}  // namespace splitspec::engine
