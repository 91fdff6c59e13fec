// The correctness invariants of tree forwards and KV compaction, bit for bit:
//  - each tree node's logits equal those of its root-to-node path run as a plain chain;
//  - after committing an accepted path (and after truncating), the cache holds exactly what a
//    fresh prefill of the committed tokens holds, and the next forward gives the same logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "tests/unit/engine/test_model.h"

namespace splitspec::engine {
namespace {

using testing::ChainLogits;
using testing::LoadTinyModel;
using testing::RandomTokens;
using testing::TestModelSpec;

std::vector<int32_t> RandomParents(int n, std::mt19937_64& rng) {
  std::vector<int32_t> parents(n);
  for (int i = 0; i < n; ++i) parents[i] = static_cast<int32_t>(rng() % (i + 1)) - 1;  // in [-1, i)
  return parents;
}

std::vector<int32_t> PathTo(const std::vector<int32_t>& parents, int node) {
  std::vector<int32_t> path;
  for (int i = node; i >= 0; i = parents[i]) path.insert(path.begin(), i);
  return path;
}

// The cache rows themselves, every layer and position of `seq`, against `fresh`'s.
void ExpectSameCache(testing::LoadedModel& m, SeqId seq, SeqId fresh) {
  const ModelConfig& config = m.model->config();
  const size_t row_bytes = DTypeRowBytes(m.kv->k(0).dtype, static_cast<int64_t>(config.n_heads_kv) * config.head_dim);
  // Slot `slot`'s row of a cache tensor of either dtype.
  auto row = [&](const Tensor& cache, int32_t slot) { return static_cast<const uint8_t*>(cache.data) + slot * row_bytes; };
  for (int layer = 0; layer < config.n_layers; ++layer) {
    for (int32_t pos = 0; pos < m.kv->Length(seq); ++pos) {
      ASSERT_EQ(std::memcmp(row(m.kv->k(layer), m.kv->Slot(seq, pos)), row(m.kv->k(layer), m.kv->Slot(fresh, pos)),
                            row_bytes), 0) << "K layer " << layer << " pos " << pos;
      ASSERT_EQ(std::memcmp(row(m.kv->v(layer), m.kv->Slot(seq, pos)), row(m.kv->v(layer), m.kv->Slot(fresh, pos)),
                            row_bytes), 0) << "V layer " << layer << " pos " << pos;
    }
  }
}

class TreeForwardTest : public ::testing::TestWithParam<TestModelSpec> {};

TEST_P(TreeForwardTest, EachNodeMatchesItsPathRunAsAChain) {
  testing::LoadedModel m = LoadTinyModel(GetParam(), 512);
  const int vocab = m.model->config().vocab_size;
  std::mt19937_64 rng(1234);
  SeqId next_seq = 1;
  for (int trial = 0; trial < 6; ++trial) {
    const int n_context = 1 + static_cast<int>(rng() % 40);
    const int n_nodes = 1 + static_cast<int>(rng() % 12);
    const std::vector<int32_t> context = RandomTokens(n_context, vocab, rng());
    const std::vector<int32_t> nodes = RandomTokens(n_nodes, vocab, rng());
    const std::vector<int32_t> parents = RandomParents(n_nodes, rng);

    const SeqId tree_seq = next_seq++;
    ChainLogits(*m.model, *m.kv, tree_seq, context);
    SequenceStep step{tree_seq, nodes, parents, {}};
    for (int i = 0; i < n_nodes; ++i) step.logit_nodes.push_back(i);
    ForwardResult tree;
    ASSERT_TRUE(m.model->Forward({step}, *m.kv, &tree).ok());

    for (int node = 0; node < n_nodes; ++node) {
      std::vector<int32_t> chain = context;
      for (int32_t i : PathTo(parents, node)) chain.push_back(nodes[i]);
      const SeqId chain_seq = next_seq++;
      const std::vector<float> logits = ChainLogits(*m.model, *m.kv, chain_seq, chain);
      m.kv->Release(chain_seq);
      ASSERT_EQ(std::memcmp(tree.Row(node), logits.data() + (chain.size() - 1) * vocab, vocab * sizeof(float)), 0)
          << "trial " << trial << " node " << node;
    }
    m.kv->Release(tree_seq);
  }
}

// A tree grown over several forwards (a drafter feeding one depth at a time, the earlier nodes
// left in the cache as tree context) gives every node its path's chain logits, and committing
// a path afterwards leaves the cache of a fresh prefill.
TEST_P(TreeForwardTest, TreeGrownOverSeveralForwardsMatchesChainsAndCommits) {
  testing::LoadedModel m = LoadTinyModel(GetParam(), 512);
  const ModelConfig& config = m.model->config();
  const int vocab = config.vocab_size;
  std::mt19937_64 rng(4321);
  SeqId next_seq = 5000;
  for (int trial = 0; trial < 6; ++trial) {
    const int n_context = 1 + static_cast<int>(rng() % 30);
    const int n_nodes = 2 + static_cast<int>(rng() % 12);
    const std::vector<int32_t> context = RandomTokens(n_context, vocab, rng());
    const std::vector<int32_t> nodes = RandomTokens(n_nodes, vocab, rng());
    const std::vector<int32_t> parents = RandomParents(n_nodes, rng);

    // Feed the nodes in consecutive chunks; node indices are the same in every chunk's
    // combined (cached, then new) numbering, so parents carry over unchanged.
    const SeqId seq = next_seq++;
    ChainLogits(*m.model, *m.kv, seq, context);
    std::vector<float> logits(static_cast<size_t>(n_nodes) * vocab);
    for (int begin = 0; begin < n_nodes;) {
      const int end = std::min(n_nodes, begin + 1 + static_cast<int>(rng() % 4));
      SequenceStep step;
      step.seq = seq;
      step.tree_context.assign(parents.begin(), parents.begin() + begin);
      step.tokens.assign(nodes.begin() + begin, nodes.begin() + end);
      step.parents.assign(parents.begin() + begin, parents.begin() + end);
      for (int i = 0; i < end - begin; ++i) step.logit_nodes.push_back(i);
      ForwardResult result;
      ASSERT_TRUE(m.model->Forward({step}, *m.kv, &result).ok());
      std::memcpy(&logits[static_cast<size_t>(begin) * vocab], result.logits.data(),
                  result.logits.size() * sizeof(float));
      begin = end;
    }
    ASSERT_EQ(m.kv->Length(seq), n_context + n_nodes);
    for (int node = 0; node < n_nodes; ++node) {
      std::vector<int32_t> chain = context;
      for (int32_t i : PathTo(parents, node)) chain.push_back(nodes[i]);
      const SeqId chain_seq = next_seq++;
      const std::vector<float> expected = ChainLogits(*m.model, *m.kv, chain_seq, chain);
      m.kv->Release(chain_seq);
      ASSERT_EQ(std::memcmp(&logits[static_cast<size_t>(node) * vocab],
                            expected.data() + (chain.size() - 1) * vocab, vocab * sizeof(float)), 0)
          << "trial " << trial << " node " << node;
    }

    const std::vector<int32_t> accepted = PathTo(parents, static_cast<int>(rng() % n_nodes));
    ASSERT_TRUE(m.kv->CommitPath(seq, n_context, accepted).ok());
    std::vector<int32_t> committed = context;
    for (int32_t i : accepted) committed.push_back(nodes[i]);
    const SeqId fresh = next_seq++;
    ChainLogits(*m.model, *m.kv, fresh, committed);
    ExpectSameCache(m, seq, fresh);
    for (SeqId s : {seq, fresh}) m.kv->Release(s);
  }
  EXPECT_EQ(m.kv->free_blocks(), m.kv->total_blocks());
}

TEST_P(TreeForwardTest, BadTreeContextIsRefusedBeforeTouchingTheCache) {
  testing::LoadedModel m = LoadTinyModel(GetParam(), 64);
  const int vocab = m.model->config().vocab_size;
  const SeqId seq = 1;
  ChainLogits(*m.model, *m.kv, seq, RandomTokens(3, vocab, 1));
  ForwardResult result;
  // More cached nodes than the cache holds; a cached node whose parent is not earlier; no
  // parents for the new tokens; a new token whose parent is past the cached nodes.
  const std::vector<SequenceStep> bad = {
      SequenceStep{seq, {1}, {-1}, {0}, {-1, 0, 1, 2}},
      SequenceStep{seq, {1}, {-1}, {0}, {0}},
      SequenceStep{seq, {1}, {}, {0}, {-1}},
      SequenceStep{seq, {1}, {1}, {0}, {-1}},
  };
  for (const SequenceStep& step : bad) {
    EXPECT_TRUE(absl::IsInvalidArgument(m.model->Forward({step}, *m.kv, &result)));
    EXPECT_EQ(m.kv->Length(seq), 3);
  }
}

TEST_P(TreeForwardTest, CommitAndTruncateEqualAFreshPrefill) {
  testing::LoadedModel m = LoadTinyModel(GetParam(), 512);
  const ModelConfig& config = m.model->config();
  const int vocab = config.vocab_size;
  std::mt19937_64 rng(99);
  SeqId next_seq = 1000;
  for (int trial = 0; trial < 6; ++trial) {
    const int n_context = 1 + static_cast<int>(rng() % 30);
    const int n_nodes = 1 + static_cast<int>(rng() % 10);
    const std::vector<int32_t> context = RandomTokens(n_context, vocab, rng());
    const std::vector<int32_t> nodes = RandomTokens(n_nodes, vocab, rng());
    const std::vector<int32_t> parents = RandomParents(n_nodes, rng);
    const std::vector<int32_t> accepted = PathTo(parents, static_cast<int>(rng() % n_nodes));
    const int32_t next_token = static_cast<int32_t>(rng() % vocab);

    const SeqId seq = next_seq++;
    ChainLogits(*m.model, *m.kv, seq, context);
    ForwardResult ignored;
    ASSERT_TRUE(m.model->Forward({SequenceStep{seq, nodes, parents, {}}}, *m.kv, &ignored).ok());
    ASSERT_TRUE(m.kv->CommitPath(seq, n_context, accepted).ok());

    std::vector<int32_t> committed = context;
    for (int32_t i : accepted) committed.push_back(nodes[i]);
    ASSERT_EQ(m.kv->Length(seq), static_cast<int32_t>(committed.size()));

    const SeqId fresh = next_seq++;
    ChainLogits(*m.model, *m.kv, fresh, committed);
    ExpectSameCache(m, seq, fresh);
    // And the next forward after the commit.
    ForwardResult after_commit, after_fresh;
    ASSERT_TRUE(m.model->Forward({SequenceStep{seq, {next_token}, {}, {0}}}, *m.kv, &after_commit).ok());
    ASSERT_TRUE(m.model->Forward({SequenceStep{fresh, {next_token}, {}, {0}}}, *m.kv, &after_fresh).ok());
    ASSERT_EQ(std::memcmp(after_commit.Row(0), after_fresh.Row(0), vocab * sizeof(float)), 0) << "trial " << trial;

    // Truncating back into the context, then feeding a token, equals the shorter prefill.
    const int32_t keep = static_cast<int32_t>(rng() % n_context) + 1;
    ASSERT_TRUE(m.kv->Truncate(seq, keep).ok());
    ForwardResult after_truncate;
    ASSERT_TRUE(m.model->Forward({SequenceStep{seq, {next_token}, {}, {0}}}, *m.kv, &after_truncate).ok());
    std::vector<int32_t> prefix(context.begin(), context.begin() + keep);
    prefix.push_back(next_token);
    const SeqId shorter = next_seq++;
    const std::vector<float> expected = ChainLogits(*m.model, *m.kv, shorter, prefix);
    ASSERT_EQ(std::memcmp(after_truncate.Row(0), expected.data() + keep * vocab, vocab * sizeof(float)), 0);
    for (SeqId s : {seq, fresh, shorter}) m.kv->Release(s);
  }
  EXPECT_EQ(m.kv->free_blocks(), m.kv->total_blocks());
}

INSTANTIATE_TEST_SUITE_P(Variants, TreeForwardTest,
                         ::testing::Values(TestModelSpec{DType::kF32, false, true, 7},
                                           TestModelSpec{DType::kF16, false, true, 8},
                                           TestModelSpec{DType::kBF16, true, false, 9},
                                           // The same invariants with the cache's rows in F16.
                                           TestModelSpec{DType::kF32, false, true, 7, DType::kF16},
                                           TestModelSpec{DType::kBF16, true, false, 9, DType::kF16}));

}  // namespace
}  // namespace splitspec::engine
