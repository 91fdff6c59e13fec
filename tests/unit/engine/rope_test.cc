// The CPU backend's rotary embedding against the rotation written out element by element, to
// the bit: one token and many (on one thread and on several), other frequencies, other head
// counts, positions far apart.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/engine/backend.h"

namespace splitspec::engine {
namespace {

RopeTables Frequencies(int head_dim, float theta) {
  RopeTables tables;
  tables.head_dim = head_dim;
  for (int i = 0; i < head_dim / 2; ++i) {
    tables.inv_freq.push_back(1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim)));
  }
  return tables;
}

// Llama's half-split rotation of row-major (rows, n_heads * head_dim) values, one element at a
// time: the arithmetic the backend's contract states.
std::vector<float> Rotated(std::vector<float> x, int n_heads, const RopeTables& tables,
                           const std::vector<int32_t>& positions) {
  const int head_dim = tables.head_dim, half = head_dim / 2;
  for (size_t t = 0; t < positions.size(); ++t) {
    for (int h = 0; h < n_heads; ++h) {
      float* head = x.data() + (t * n_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const float angle = static_cast<float>(positions[t]) * tables.inv_freq[i];
        const float c = std::cos(angle), s = std::sin(angle);
        const float a = head[i], b = head[i + half];
        head[i] = a * c - b * s;
        head[i + half] = b * c + a * s;
      }
    }
  }
  return x;
}

class RopeTest : public ::testing::Test {
 protected:
  // The backend's rotation of `x` (rows = positions.size()).
  std::vector<float> BackendRotated(const std::vector<float>& x, int n_heads, const RopeTables& tables,
                                    const std::vector<int32_t>& positions) {
    Tensor tensor = *backend_->Allocate(DType::kF32, static_cast<int64_t>(positions.size()),
                                        static_cast<int64_t>(n_heads) * tables.head_dim);
    backend_->Upload(x.data(), tensor);
    backend_->Rope(tensor, n_heads, tables, positions);
    std::vector<float> out(x.size());
    backend_->DownloadRows(tensor, 0, tensor.rows, out.data());
    backend_->Free(tensor);
    return out;
  }

  std::vector<float> Random(size_t n) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng_);
    return v;
  }

  std::unique_ptr<Backend> backend_ = CreateCpuBackend({});
  std::mt19937 rng_{7};
};

TEST_F(RopeTest, EqualsTheRotationElementByElementAsPositionsAndFrequenciesChange) {
  const RopeTables base = Frequencies(64, 10000.0f);
  const RopeTables other = Frequencies(64, 500000.0f);
  const RopeTables narrow = Frequencies(32, 10000.0f);
  struct Call {
    const RopeTables* tables;
    int n_heads;
    std::vector<int32_t> positions;
  };
  // Calls as a forward makes them (q, then k with fewer heads, at the same positions) and
  // calls that change one thing at a time.
  const std::vector<Call> calls = {
      {&base, 12, {5}},           {&base, 4, {5}},           {&base, 12, {6}},
      {&base, 12, {6, 7, 8, 9}},  {&base, 12, {6, 7, 8, 10}}, {&base, 12, {6, 7, 8}},
      {&other, 12, {6, 7, 8}},    {&narrow, 8, {6, 7, 8}},    {&base, 3, {4095, 0, 4095}},
      {&base, 12, std::vector<int32_t>(300, 17)},  // enough work to run on several threads
  };
  for (size_t c = 0; c < calls.size(); ++c) {
    const Call& call = calls[c];
    const std::vector<float> x = Random(call.positions.size() * call.n_heads * call.tables->head_dim);
    const std::vector<float> expected = Rotated(x, call.n_heads, *call.tables, call.positions);
    const std::vector<float> got = BackendRotated(x, call.n_heads, *call.tables, call.positions);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0) << "call " << c;
  }
}

}  // namespace
}  // namespace splitspec::engine
