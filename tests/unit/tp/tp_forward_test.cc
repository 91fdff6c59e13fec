// Tensor-parallel forwards on the CPU backend, ranks as threads over the in-process
// communicator: sharded logits match the unsharded model within a float-reassociation
// tolerance, the tree-vs-chain bit-exactness survives sharding, and greedy generation under
// TP = 2 reproduces TP = 1 token for token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/engine/comm/in_process_communicator.h"
#include "common/engine/generation/generate.h"
#include "common/engine/model/llama_model.h"
#include "common/engine/model/model_maker.h"
#include "tests/support/scoped_temp_dir.h"

namespace splitspec::engine {
namespace {

// Sharding only re-associates float sums (the o/down projections are summed over shards
// instead of in one pass): measured differences are ~6e-7 of the logits' scale (printed by the
// test). 5e-5 leaves ~100x headroom and is far below what a wrong split (a misplaced head, a
// missed all-reduce) does, which moves logits by O(1).
constexpr float kRelativeTolerance = 5e-5f;

struct ModelSpec {
  const char* name;
  int n_heads;
  int n_heads_kv;
  DType dtype;
  bool attention_bias;
};

std::string ModelDir(const ModelSpec& spec) {
  ModelConfig config = *PresetConfig("tiny");
  config.n_heads = spec.n_heads;
  config.n_heads_kv = spec.n_heads_kv;
  config.head_dim = config.hidden_size / spec.n_heads;
  config.attention_bias = spec.attention_bias;
  const std::string dir = absl::StrCat(splitspec::testing::ProcessTempDir("tp_"), "/", spec.name);
  const absl::Status status = WriteRandomModel(config, spec.dtype, /*seed=*/11, dir);
  EXPECT_TRUE(status.ok()) << status;
  return dir;
}

using RankBody = std::function<void(int rank, LlamaModel& model, KvCache& kv)>;

// Loads shard r of `tp` on thread r (each with its own single-threaded CPU backend) and runs
// body on every rank concurrently. tp == 1 loads the plain model, without a communicator.
void RunTp(const std::string& dir, int tp, const RankBody& body) {
  auto group = CreateInProcessGroup(tp);
  ASSERT_TRUE(group.ok());
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Backend> backend = CreateCpuBackend({.n_threads = 1});
      ModelLoadOptions options;
      if (tp > 1) {
        options.tp_rank = r;
        options.tp_size = tp;
        options.comm = (*group)[r].get();
      }
      auto model = LlamaModel::Load(dir, *backend, options);
      // A failed load on one rank would leave the others waiting in a collective: abort loudly.
      if (!model.ok()) {
        ADD_FAILURE() << model.status();
        std::abort();
      }
      auto kv = (*model)->CreateKvCache(64);
      if (!kv.ok()) std::abort();
      body(r, **model, **kv);
    });
  }
  for (std::thread& t : threads) t.join();
}

std::vector<int32_t> RandomTokens(int n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return tokens;
}

// Logits of every node of `tokens` fed as one chain to a new sequence, on rank 0.
std::vector<float> TpChainLogits(const std::string& dir, int tp, const std::vector<int32_t>& tokens) {
  std::vector<float> logits;
  RunTp(dir, tp, [&](int rank, LlamaModel& model, KvCache& kv) {
    ASSERT_TRUE(kv.AddSequence(1).ok());
    SequenceStep step{1, tokens, {}, {}};
    for (int32_t i = 0; i < static_cast<int32_t>(tokens.size()); ++i) step.logit_nodes.push_back(i);
    ForwardResult result;
    const absl::Status status = model.Forward({step}, kv, &result);
    EXPECT_TRUE(status.ok()) << status;
    if (rank == 0) logits = result.logits;
  });
  return logits;
}

void ExpectClose(const std::vector<float>& expected, const std::vector<float>& actual, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  ASSERT_FALSE(expected.empty()) << what;
  float scale = 1.0f;
  for (float v : expected) scale = std::max(scale, std::fabs(v));
  float worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) worst = std::max(worst, std::fabs(expected[i] - actual[i]));
  EXPECT_LE(worst, kRelativeTolerance * scale) << what << ": logit scale " << scale;
  std::printf("%s: max |difference| / logit scale = %.3g\n", what.c_str(), worst / scale);
}

TEST(TpForwardTest, ShardedLogitsMatchTheWholeModel) {
  const std::vector<ModelSpec> specs = {
      {"tiny_f32", 4, 2, DType::kF32, false},
      {"tiny_bf16_bias", 4, 2, DType::kBF16, true},
      {"kv4_f32", 4, 4, DType::kF32, false},
  };
  for (const ModelSpec& spec : specs) {
    const std::string dir = ModelDir(spec);
    const std::vector<int32_t> tokens = RandomTokens(13, 512, 5);
    const std::vector<float> whole = TpChainLogits(dir, 1, tokens);
    for (int tp : {2, 4}) {
      if (spec.n_heads_kv % tp != 0) continue;
      ExpectClose(whole, TpChainLogits(dir, tp, tokens), absl::StrCat(spec.name, " tp ", tp));
    }
  }
}

TEST(TpForwardTest, RejectsShardingsTheShapeDoesNotAllow) {
  const std::string dir = ModelDir({"tiny_reject", 4, 2, DType::kF32, false});
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  auto group = CreateInProcessGroup(4);
  ASSERT_TRUE(group.ok());
  ModelLoadOptions options;
  options.tp_size = 4;  // 2 KV heads cannot be split 4 ways
  options.comm = (*group)[0].get();
  EXPECT_EQ(LlamaModel::Load(dir, *backend, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.tp_size = 2;  // a group of 4 for TP 2
  EXPECT_EQ(LlamaModel::Load(dir, *backend, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.comm = nullptr;
  EXPECT_EQ(LlamaModel::Load(dir, *backend, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.tp_rank = 2;
  EXPECT_EQ(LlamaModel::Load(dir, *backend, options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TpForwardTest, ShardsHoldTheirShareOfTheKvHeads) {
  const std::string dir = ModelDir({"kv4_share", 4, 4, DType::kF32, false});
  RunTp(dir, 4, [](int, LlamaModel& model, KvCache& kv) {
    EXPECT_EQ(kv.layout().n_heads_kv, 1);
    EXPECT_EQ(model.config().n_heads_kv, 4) << "config() keeps the whole model's shape";
    EXPECT_EQ(model.tp_size(), 4);
  });
}

// A tree step's node logits equal, bit for bit, the chain of its root-to-node path, on a
// sharded model too (the all-reduce sums each element in rank order whatever the batch).
TEST(TpForwardTest, TreeNodesEqualTheirChainsUnderSharding) {
  const std::string dir = ModelDir({"tiny_tree", 4, 2, DType::kF32, false});
  const std::vector<int32_t> context = RandomTokens(9, 512, 21);
  const std::vector<int32_t> tree_tokens = RandomTokens(5, 512, 22);
  const std::vector<int32_t> parents = {-1, 0, 0, 1, 2};
  const std::vector<int32_t> path_to_node3 = {0, 1, 3};
  RunTp(dir, 2, [&](int, LlamaModel& model, KvCache& kv) {
    ForwardResult prefill, tree, chain;
    ASSERT_TRUE(kv.AddSequence(1).ok());
    ASSERT_TRUE(model.Forward({SequenceStep{1, context, {}, {}}}, kv, &prefill).ok());
    ASSERT_TRUE(model.Forward({SequenceStep{1, tree_tokens, parents, {3}}}, kv, &tree).ok());
    std::vector<int32_t> chain_tokens = context;
    for (int32_t node : path_to_node3) chain_tokens.push_back(tree_tokens[node]);
    ASSERT_TRUE(kv.AddSequence(2).ok());
    ASSERT_TRUE(model.Forward({SequenceStep{2, chain_tokens, {}, {static_cast<int32_t>(chain_tokens.size()) - 1}}},
                              kv, &chain)
                    .ok());
    ASSERT_EQ(tree.logits.size(), chain.logits.size());
    for (size_t i = 0; i < tree.logits.size(); ++i) ASSERT_EQ(tree.logits[i], chain.logits[i]) << i;
  });
}

TEST(TpForwardTest, GreedyGenerationWithTwoShardsEqualsOne) {
  const std::string dir = ModelDir({"tiny_greedy", 4, 2, DType::kF32, false});
  GenerateOptions options;
  options.max_tokens = 32;
  const std::vector<int32_t> prompt = RandomTokens(7, 512, 31);
  std::vector<std::vector<int32_t>> outputs(3);
  RunTp(dir, 1, [&](int, LlamaModel& model, KvCache& kv) {
    auto tokens = GenerateTokens(model, kv, prompt, options);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    outputs[0] = *tokens;
  });
  RunTp(dir, 2, [&](int rank, LlamaModel& model, KvCache& kv) {
    auto tokens = GenerateTokens(model, kv, prompt, options);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    outputs[1 + rank] = *tokens;
  });
  ASSERT_EQ(outputs[0].size(), 32u);
  EXPECT_EQ(outputs[1], outputs[0]) << "rank 0 of TP 2 diverged from TP 1";
  EXPECT_EQ(outputs[2], outputs[1]) << "the ranks disagree (replicated logits must be identical)";
}

}  // namespace
}  // namespace splitspec::engine
