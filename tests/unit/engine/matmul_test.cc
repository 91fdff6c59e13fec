// CPU kernels against straightforward double-precision references, and their invariance to
// how rows are batched and how many threads run.
#include <omp.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "common/engine/backend.h"
#include "common/engine/cpu/matmul_parts.h"
#include "common/engine/model/model_maker.h"

namespace splitspec::engine {
namespace {

struct Sizes {
  int n_out;
  int n_in;
  int n_tokens;
};

// A (n_rows, n_in) weight matrix of normal(0, 1) values from `rng`, stored as dtype.
Tensor RandomWeights(Backend& backend, DType dtype, int64_t n_rows, int64_t n_in, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n_rows * n_in));
  for (float& v : values) v = normal(rng);
  const std::vector<uint8_t> bytes = EncodeValues(values, dtype);
  Tensor w = *backend.Allocate(dtype, n_rows, n_in);
  backend.Upload(bytes.data(), w);
  return w;
}

class MatMulTest : public ::testing::TestWithParam<std::tuple<DType, Sizes>> {};

TEST_P(MatMulTest, MatchesDoubleReferenceAndIsBatchInvariant) {
  const auto [dtype, sizes] = GetParam();
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w_values(static_cast<size_t>(sizes.n_out) * sizes.n_in);
  for (float& v : w_values) v = normal(rng);
  const std::vector<uint8_t> w_bytes = EncodeValues(w_values, dtype);
  // The reference uses the weights as stored (rounded to the dtype).
  std::vector<float> w_stored(w_values.size());
  for (size_t i = 0; i < w_values.size(); ++i) {
    uint16_t h;
    switch (dtype) {
      case DType::kF32: std::memcpy(&w_stored[i], &w_bytes[4 * i], 4); break;
      case DType::kF16: std::memcpy(&h, &w_bytes[2 * i], 2); w_stored[i] = F16ToF32(h); break;
      case DType::kBF16: std::memcpy(&h, &w_bytes[2 * i], 2); w_stored[i] = BF16ToF32(h); break;
      case DType::kQ8_0: break;  // quantized_test.cc covers it
    }
  }
  Tensor w = *backend->Allocate(dtype, sizes.n_out, sizes.n_in);
  backend->Upload(w_bytes.data(), w);
  Tensor bias = *backend->Allocate(DType::kF32, 1, sizes.n_out);
  for (int i = 0; i < sizes.n_out; ++i) bias.f32()[i] = normal(rng);
  Tensor x = *backend->Allocate(DType::kF32, sizes.n_tokens, sizes.n_in);
  for (int64_t i = 0; i < x.n_elements(); ++i) x.f32()[i] = normal(rng);
  Tensor out = *backend->Allocate(DType::kF32, sizes.n_tokens, sizes.n_out);
  backend->MatMul(x, w, &bias, out);

  for (int t = 0; t < sizes.n_tokens; ++t) {
    for (int o = 0; o < sizes.n_out; ++o) {
      double expected = bias.f32()[o];
      for (int k = 0; k < sizes.n_in; ++k) expected += static_cast<double>(w_stored[o * sizes.n_in + k]) * x.row(t)[k];
      ASSERT_NEAR(out.row(t)[o], expected, 1e-4 * (1.0 + std::sqrt(static_cast<double>(sizes.n_in))))
          << "token " << t << " row " << o;
    }
  }
  // Each token alone, with one thread, must give the same bits as the batched call.
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor single = *backend->Allocate(DType::kF32, 1, sizes.n_out);
  for (int t = 0; t < sizes.n_tokens; ++t) {
    const std::vector<int32_t> rows = {t};
    backend->MatMul(x, w, &bias, single, rows);
    ASSERT_EQ(std::memcmp(single.row(0), out.row(t), sizes.n_out * sizeof(float)), 0) << "token " << t;
  }
  omp_set_num_threads(saved_threads);
  for (Tensor* t : {&w, &bias, &x, &out, &single}) backend->Free(*t);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatMulTest,
    ::testing::Combine(::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                       ::testing::Values(Sizes{64, 64, 1}, Sizes{67, 80, 7}, Sizes{5, 33, 16}, Sizes{128, 192, 9},
                                         Sizes{3, 7, 2}, Sizes{37, 70, 11}, Sizes{10, 40, 5}, Sizes{9, 33, 3},
                                         Sizes{130, 96, 8}, Sizes{42, 64, 4})));

// A fused projection (q, k, v as one weight matrix) must give each part exactly the bits of a
// separate MatMul over that part's rows, with part sizes that do not fill whole row blocks (the
// separate MatMuls take views of W's rows, so the shapes are ones the CPU backend keeps
// row-major: cpu/row_groups.h; row_groups_test.cc checks the grouped ones); the
// interface's default implementation (what a backend without an override runs) must agree too.
// Here for parts of part_rows rows, n_in inputs and n_tokens tokens, with and without bias.
void SplitEqualsSeparate(Backend& backend, DType dtype, const std::vector<int64_t>& part_rows, int64_t n_in,
                         int64_t n_tokens) {
  int64_t n_rows = 0;
  for (int64_t rows : part_rows) n_rows += rows;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor w = RandomWeights(backend, dtype, n_rows, n_in, rng);
  Tensor bias = *backend.Allocate(DType::kF32, 1, n_rows);
  for (int64_t i = 0; i < n_rows; ++i) bias.f32()[i] = normal(rng);
  Tensor x = *backend.Allocate(DType::kF32, n_tokens, n_in);
  for (int64_t i = 0; i < x.n_elements(); ++i) x.f32()[i] = normal(rng);

  for (const bool with_bias : {false, true}) {
    std::vector<Tensor> fused, fallback, separate;
    int64_t first = 0;
    for (int64_t rows : part_rows) {
      fused.push_back(*backend.Allocate(DType::kF32, n_tokens, rows));
      fallback.push_back(*backend.Allocate(DType::kF32, n_tokens, rows));
      separate.push_back(*backend.Allocate(DType::kF32, n_tokens, rows));
      const size_t row_bytes = static_cast<size_t>(n_in) * DTypeSize(dtype);
      const Tensor part{static_cast<uint8_t*>(w.data) + first * row_bytes, dtype, rows, n_in};
      const Tensor part_bias{bias.f32() + first, DType::kF32, 1, rows};
      backend.MatMul(x, part, with_bias ? &part_bias : nullptr, separate.back());
      first += rows;
    }
    std::vector<Tensor*> fused_outs, fallback_outs;
    for (size_t i = 0; i < part_rows.size(); ++i) {
      fused_outs.push_back(&fused[i]);
      fallback_outs.push_back(&fallback[i]);
    }
    backend.MatMulSplit(x, w, with_bias ? &bias : nullptr, fused_outs);
    backend.Backend::MatMulSplit(x, w, with_bias ? &bias : nullptr, fallback_outs);
    for (size_t i = 0; i < part_rows.size(); ++i) {
      const size_t bytes = separate[i].n_bytes();
      EXPECT_EQ(std::memcmp(fused[i].data, separate[i].data, bytes), 0) << "part " << i << " bias " << with_bias;
      EXPECT_EQ(std::memcmp(fallback[i].data, separate[i].data, bytes), 0) << "part " << i << " bias " << with_bias;
    }
    for (auto* list : {&fused, &fallback, &separate})
      for (Tensor& t : *list) backend.Free(t);
  }
  for (Tensor* t : {&w, &bias, &x}) backend.Free(*t);
}

class MatMulSplitTest : public ::testing::TestWithParam<DType> {};

// A small split runs on one thread; a large one on two. One token takes the decode path, whose
// row streams run down as well as up across the parts' boundaries; six take the row blocks.
TEST_P(MatMulSplitTest, EachPartEqualsItsOwnMatMulBitForBit) {
  const DType dtype = GetParam();
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(2);
  struct Shape {
    std::vector<int64_t> part_rows;
    int64_t n_in;
  };
  for (const Shape& shape : {Shape{{13, 8, 3}, 70}, Shape{{100, 61, 101}, 256}}) {
    for (const int64_t n_tokens : {1, 6}) {
      SCOPED_TRACE(::testing::Message() << shape.part_rows.size() << " parts of " << shape.n_in << " inputs, "
                                        << n_tokens << " tokens");
      SplitEqualsSeparate(*backend, dtype, shape.part_rows, shape.n_in, n_tokens);
    }
  }
  omp_set_num_threads(saved_threads);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MatMulSplitTest, ::testing::Values(DType::kF32, DType::kF16, DType::kBF16));

// The matmul kernels share a projection's row blocks out by pairs of threads claiming towards
// each other: every block must be visited exactly once, inside its pair's range, for any team
// size (an odd one out claims alone) and any number of blocks. The even thread's claims climb
// from the range's start and the odd thread's come down from its end, and each claim is read
// upwards (a run read downwards loses the hardware prefetchers), so the odd thread's visits are
// ascending runs, each ending just below where the one before it started.
TEST(MeetingInTheMiddleTest, VisitsEveryIndexOnceEachRunUpwards) {
  for (int n_threads = 1; n_threads <= 5; ++n_threads) {
    for (int64_t n : {0, 1, 2, 3, 7, 64, 101, 1000}) {
      std::vector<cpu::MeetingRange> ranges(n_threads);
      cpu::PlanMeetingRanges(n, n_threads, ranges.data());
      std::vector<std::atomic<int>> visits(n);
      std::vector<std::vector<int64_t>> seen(n_threads);
      int team = 0;
#pragma omp parallel num_threads(n_threads)
      {
#pragma omp single
        team = omp_get_num_threads();
        std::vector<int64_t>& mine = seen[omp_get_thread_num()];
        cpu::VisitMeetingInTheMiddle(n, ranges.data(), [&](int64_t index) {
          visits[index].fetch_add(1);
          mine.push_back(index);
        });
      }
      ASSERT_EQ(team, n_threads);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(visits[i].load(), 1) << "index " << i << " of " << n << ", " << n_threads << " threads";
      for (int thread = 0; thread < n_threads; ++thread) {
        const auto [first, end] = cpu::PairRange(n, thread / 2, n_threads);
        const std::vector<int64_t>& mine = seen[thread];
        if (mine.empty()) continue;
        for (int64_t index : mine) EXPECT_TRUE(index >= first && index < end) << "thread " << thread << " left its pair's range";
        if (thread % 2 == 0) {
          EXPECT_EQ(mine.front(), first) << "thread " << thread;
          for (size_t i = 1; i < mine.size(); ++i) EXPECT_EQ(mine[i], mine[i - 1] + 1) << "thread " << thread << " skipped or turned";
          continue;
        }
        // The odd thread: split its visits into ascending runs; the last run ends at the range's
        // end, and each later run ends where the one before it began.
        std::vector<std::pair<int64_t, int64_t>> runs;  // [begin, end) in the order read
        for (int64_t index : mine) {
          if (!runs.empty() && index == runs.back().second) {
            ++runs.back().second;
          } else {
            runs.push_back({index, index + 1});
          }
        }
        EXPECT_EQ(runs.front().second, end) << "thread " << thread << " did not start at its range's end";
        for (size_t r = 1; r < runs.size(); ++r) {
          EXPECT_EQ(runs[r].second, runs[r - 1].first) << "thread " << thread << ": run " << r << " of " << n;
        }
        // A claim holds at least kMinClaim = 2 blocks unless it takes the range's last one, so
        // four visits hold a claim of two or more; were claims read downwards, every visit
        // would be a run of its own.
        if (mine.size() >= 4) {
          EXPECT_LT(runs.size(), mine.size()) << "thread " << thread << " read its claims downwards";
        }
      }
    }
  }
}

// Each walker's first claim is 15/32 of the range whichever comes first, so the two leave
// 1/16 of it to later claims (each of which moves the range's line between the cores); those
// halve what is left, down to two blocks, and never grant past the end.
TEST(MeetingInTheMiddleTest, FirstClaimsLeaveASixteenthToMeetIn) {
  for (const int64_t size : {2, 3, 17, 64, 192, 1000, 4096}) {
    SCOPED_TRACE(::testing::Message() << size << " blocks");
    cpu::MeetingRange range;
    range.Reset(size);
    const int64_t first = range.FirstClaim();
    const int64_t second = range.FirstClaim();
    EXPECT_EQ(first, std::min(size, std::max<int64_t>(2, size * 15 / 32)));
    EXPECT_EQ(second, std::min(size - first, std::max<int64_t>(2, size * 15 / 32)));
    int64_t granted = first + second;
    for (int64_t left = size - granted, claim = range.Claim(); claim > 0; claim = range.Claim()) {
      EXPECT_EQ(claim, std::min(left, std::max<int64_t>(2, left / 2)));
      granted += claim;
      left -= claim;
    }
    EXPECT_EQ(granted, size);
    EXPECT_LE(size - first - second, size / 16 + 2);
  }
}

// A row block's prefetch shared by its first tiles (SharedBlockPrefetch) asks for every byte of
// the block once, tile after tile in order, each share at least a cache line a step; as many
// tiles share it as the tiles and that floor allow (a power of two), the rest ask for nothing.
TEST(BlockPrefetchTest, SharesCoverTheBlockOnceInOrder) {
  static char block[1 << 16];
  for (size_t bytes_per_step : {size_t{32}, size_t{64}, size_t{128}, size_t{256}}) {
    for (int64_t n_steps : {1, 7, 128}) {
      for (int64_t n_tiles = 1; n_tiles <= 7; ++n_tiles) {
        const cpu::BlockPrefetch plan = cpu::SharedBlockPrefetch(block, bytes_per_step, n_steps, n_tiles);
        SCOPED_TRACE(::testing::Message() << bytes_per_step << " bytes a step, " << n_steps << " steps, " << n_tiles
                                          << " tiles, " << plan.sharers << " sharers");
        ASSERT_GE(plan.sharers, 1);
        EXPECT_EQ(plan.sharers & (plan.sharers - 1), 0) << "not a power of two";
        EXPECT_LE(plan.sharers, n_tiles);
        EXPECT_TRUE(plan.sharers == 1 || bytes_per_step / plan.sharers >= cpu::kCacheLine);
        // The largest such count: twice as many would break a bound.
        EXPECT_TRUE(plan.sharers * 2 > n_tiles || bytes_per_step / (plan.sharers * 2) < cpu::kCacheLine);
        const char* next = block;
        for (int64_t tile = 0; tile < n_tiles; ++tile) {
          const cpu::StepPrefetch share = plan.ShareOf(tile);
          if (tile >= plan.sharers) {
            EXPECT_EQ(share.at, nullptr) << "tile " << tile;
            continue;
          }
          EXPECT_EQ(share.at, next) << "tile " << tile;
          EXPECT_EQ(share.bytes_per_step * plan.sharers, bytes_per_step);
          next = share.at + share.bytes_per_step * n_steps;
        }
        EXPECT_EQ(next, block + bytes_per_step * n_steps) << "the shares do not end at the block's end";
      }
    }
  }
  EXPECT_EQ(cpu::SharedBlockPrefetch(nullptr, 128, 8, 4).ShareOf(0).at, nullptr);
}

// Whatever the number of threads sharing a projection (pairs, an odd one out), every output has
// the bits of the one-thread result: for one token (row streams), for five (F32: row streams
// two tokens a tile; BF16: row blocks) and for twelve (row blocks).
TEST(MatMulThreadsTest, AnyThreadCountGivesTheOneThreadBits) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  for (const auto& [dtype, n_tokens] : std::vector<std::pair<DType, int64_t>>{
           {DType::kF32, 1}, {DType::kBF16, 1}, {DType::kF32, 5}, {DType::kBF16, 5}, {DType::kF32, 12}}) {
    const int64_t n_out = 262, n_in = 256;  // big enough for a parallel region
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Tensor w = RandomWeights(*backend, dtype, n_out, n_in, rng);
    Tensor x = *backend->Allocate(DType::kF32, n_tokens, n_in);
    for (int64_t i = 0; i < x.n_elements(); ++i) x.f32()[i] = normal(rng);
    const int saved_threads = omp_get_max_threads();
    std::vector<Tensor> outs;
    for (int threads = 1; threads <= 4; ++threads) {
      omp_set_num_threads(threads);
      outs.push_back(*backend->Allocate(DType::kF32, n_tokens, n_out));
      backend->MatMul(x, w, nullptr, outs.back());
    }
    omp_set_num_threads(saved_threads);
    for (size_t i = 1; i < outs.size(); ++i) {
      EXPECT_EQ(std::memcmp(outs[i].data, outs[0].data, outs[0].n_bytes()), 0)
          << DTypeName(dtype) << ", " << n_tokens << " tokens, with " << i + 1 << " threads";
    }
    for (Tensor& t : outs) backend->Free(t);
    for (Tensor* t : {&w, &x}) backend->Free(*t);
  }
}

TEST(CpuOpsTest, RmsNormAndSiluMulMatchReference) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  const int n = 37;
  Tensor x = *backend->Allocate(DType::kF32, 2, n);
  Tensor w = *backend->Allocate(DType::kF32, 1, n);
  Tensor out = *backend->Allocate(DType::kF32, 2, n);
  for (int i = 0; i < 2 * n; ++i) x.f32()[i] = std::sin(0.3f * i) * 2.0f;
  for (int i = 0; i < n; ++i) w.f32()[i] = 0.5f + 0.01f * i;
  backend->RmsNorm(x, w, 1e-5f, out);
  for (int t = 0; t < 2; ++t) {
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += static_cast<double>(x.row(t)[i]) * x.row(t)[i];
    const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(out.row(t)[i], x.row(t)[i] * inv * w.f32()[i], 1e-5);
  }
  Tensor gate_up = *backend->Allocate(DType::kF32, 2, 2 * n);
  Tensor act = *backend->Allocate(DType::kF32, 2, n);
  for (int i = 0; i < 4 * n; ++i) gate_up.f32()[i] = std::cos(0.7f * i) * 3.0f;
  backend->SiluMul(gate_up, act);
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < n; ++i) {
      const double g = gate_up.row(t)[i];
      EXPECT_NEAR(act.row(t)[i], g / (1 + std::exp(-g)) * gate_up.row(t)[n + i], 1e-5);
    }
  }
  for (Tensor* t : {&x, &w, &out, &gate_up, &act}) backend->Free(*t);
}

}  // namespace
}  // namespace splitspec::engine
