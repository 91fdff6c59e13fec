// TimedBackend: the same results as the backend it wraps, and per-kind op counts, weight bytes
// and times that add up for a forward of a known shape.
#include "common/engine/timed_backend.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "tests/unit/engine/test_model.h"

namespace splitspec::engine {
namespace {

struct TimedModel {
  std::unique_ptr<Backend> cpu = CreateCpuBackend();
  TimedBackend timed{*cpu};
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<KvCache> kv;
};

std::unique_ptr<TimedModel> LoadTimed() {
  auto m = std::make_unique<TimedModel>();
  auto model = LlamaModel::Load(testing::TinyModelDir(), m->timed);
  EXPECT_TRUE(model.ok()) << model.status();
  m->model = std::move(*model);
  auto kv = m->model->CreateKvCache(16, 16, DType::kF32);
  EXPECT_TRUE(kv.ok()) << kv.status();
  m->kv = std::move(*kv);
  return m;
}

// The F32 weights one forward's matmuls read: per layer q, k, v, o, gate, up and down, then
// the output head.
int64_t MatMulWeightBytes(const ModelConfig& c) {
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim, kv_dim = int64_t{c.n_heads_kv} * c.head_dim;
  const int64_t per_layer = (q_dim + 2 * kv_dim) * c.hidden_size + c.hidden_size * q_dim +
                            2 * int64_t{c.intermediate_size} * c.hidden_size + c.hidden_size * c.intermediate_size;
  return 4 * (c.n_layers * per_layer + int64_t{c.vocab_size} * c.hidden_size);
}

TEST(TimedBackendTest, GivesTheWrappedBackendsLogitsBitForBit) {
  testing::LoadedModel plain = testing::LoadTinyModel();
  std::unique_ptr<TimedModel> timed = LoadTimed();
  timed->timed.set_timing(true);
  const std::vector<int32_t> tokens = testing::RandomTokens(9, plain.model->config().vocab_size, 3);
  EXPECT_EQ(testing::ChainLogits(*timed->model, *timed->kv, 1, tokens),
            testing::ChainLogits(*plain.model, *plain.kv, 1, tokens));
}

TEST(TimedBackendTest, CountsEachKindOfOpOfADecodeForward) {
  std::unique_ptr<TimedModel> m = LoadTimed();
  const ModelConfig& c = m->model->config();
  ASSERT_TRUE(m->kv->AddSequence(1).ok());
  ForwardResult result;
  ASSERT_TRUE(m->model->Forward({SequenceStep{1, {4, 8, 15}, {}, {2}}}, *m->kv, &result).ok());
  EXPECT_EQ(m->timed.times().matmul_calls, 0);  // timing starts off
  EXPECT_EQ(m->timed.times().total_seconds(), 0);

  m->timed.set_timing(true);
  ASSERT_TRUE(m->model->Forward({SequenceStep{1, {16}, {}, {0}}}, *m->kv, &result).ok());
  m->timed.set_timing(false);
  const OpTimes& t = m->timed.times();
  EXPECT_EQ(t.matmul_calls, 4 * c.n_layers + 1);  // qkv, o, gate-up, down; the head
  EXPECT_EQ(t.matmul_weight_bytes, MatMulWeightBytes(c));
  EXPECT_EQ(t.attention_calls, c.n_layers);
  // The embedding; per layer two norms, two RoPEs, two adds, SiLU; the final norm, the logits' copy.
  EXPECT_EQ(t.elementwise_calls, 1 + 7 * c.n_layers + 2);
  EXPECT_GT(t.matmul_seconds, 0);
  EXPECT_GT(t.attention_seconds, 0);
  EXPECT_GT(t.elementwise_seconds, 0);

  // The same matmuls by weight shape: each layer's projections once a layer, the head once.
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim, kv_dim = int64_t{c.n_heads_kv} * c.head_dim;
  std::map<MatMulShape, int64_t> expected_calls;
  for (const MatMulShape& shape : {MatMulShape{q_dim + 2 * kv_dim, c.hidden_size, DType::kF32},
                                   MatMulShape{c.hidden_size, q_dim, DType::kF32},
                                   MatMulShape{2 * int64_t{c.intermediate_size}, c.hidden_size, DType::kF32},
                                   MatMulShape{c.hidden_size, c.intermediate_size, DType::kF32}}) {
    expected_calls[shape] += c.n_layers;
  }
  expected_calls[MatMulShape{c.vocab_size, c.hidden_size, DType::kF32}] += 1;
  ASSERT_EQ(t.matmul_by_shape.size(), expected_calls.size());
  double shape_seconds = 0;
  for (const auto& [shape, times] : t.matmul_by_shape) {
    ASSERT_EQ(expected_calls.count(shape), 1u) << shape.rows << " x " << shape.cols;
    EXPECT_EQ(times.calls, expected_calls[shape]) << shape.rows << " x " << shape.cols;
    EXPECT_EQ(times.weight_bytes, times.calls * shape.rows * shape.cols * 4) << shape.rows << " x " << shape.cols;
    EXPECT_GT(times.seconds, 0);
    shape_seconds += times.seconds;
  }
  EXPECT_NEAR(shape_seconds, t.matmul_seconds, 1e-9);

  const OpTimes before = t;
  ASSERT_TRUE(m->model->Forward({SequenceStep{1, {23}, {}, {0}}}, *m->kv, &result).ok());
  EXPECT_EQ(m->timed.times().matmul_calls, before.matmul_calls);  // off again: nothing added
  m->timed.ResetTimes();
  EXPECT_EQ(m->timed.times().matmul_calls, 0);
  EXPECT_EQ(m->timed.times().total_seconds(), 0);
  EXPECT_TRUE(m->timed.times().matmul_by_shape.empty());
}

}  // namespace
}  // namespace splitspec::engine
