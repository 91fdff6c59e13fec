// The read bandwidth probe (common/engine/cpu/bandwidth.h): what its passes report and how two
// probes combine. Figures depend on the machine; only their form and the choice of the best
// are checked.
#include "common/engine/cpu/bandwidth.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::engine::cpu {
namespace {

TEST(ReadProbeTest, APassReportsEveryKernelOnceAndPicksTheFastest) {
  ReadProbe probe(size_t{4} << 20);
  const ReadCeiling first = probe.Pass();
  const ReadCeiling second = probe.Pass();
  ASSERT_EQ(first.kernels.size(), 7u);
  ASSERT_EQ(second.kernels.size(), first.kernels.size());
  for (size_t i = 0; i < first.kernels.size(); ++i) {
    EXPECT_GT(first.kernels[i].gb_per_s, 0) << first.kernels[i].name;
    EXPECT_EQ(first.kernels[i].name, second.kernels[i].name);  // the same kernels, in the same order
    for (size_t j = 0; j < i; ++j) EXPECT_NE(first.kernels[i].name, first.kernels[j].name);
  }
  const auto fastest = std::max_element(first.kernels.begin(), first.kernels.end(),
                                        [](const auto& a, const auto& b) { return a.gb_per_s < b.gb_per_s; });
  EXPECT_EQ(first.gb_per_s, fastest->gb_per_s);
  EXPECT_EQ(first.best_kernel, fastest->name);
}

TEST(ReadProbeTest, AColdPassReportsTheSameKernelsAsAPassAndPicksTheFastest) {
  ReadProbe probe(size_t{4} << 20);
  const ReadCeiling warm = probe.Pass();
  for (int pass = 0; pass < 2; ++pass) {  // the first allocates the other buffer, the second reuses it
    const ReadCeiling cold = probe.ColdPass();
    ASSERT_EQ(cold.kernels.size(), warm.kernels.size());
    for (size_t i = 0; i < cold.kernels.size(); ++i) {
      EXPECT_EQ(cold.kernels[i].name, warm.kernels[i].name);
      EXPECT_GT(cold.kernels[i].gb_per_s, 0) << cold.kernels[i].name;
      EXPECT_LE(cold.kernels[i].gb_per_s, cold.gb_per_s) << cold.kernels[i].name;
    }
    EXPECT_NE(std::find_if(cold.kernels.begin(), cold.kernels.end(),
                           [&](const auto& k) { return k.name == cold.best_kernel && k.gb_per_s == cold.gb_per_s; }),
              cold.kernels.end());
  }
}

TEST(ReadProbeTest, MaxOfKeepsEachKernelsHigherReadingAndTheBestOfThem) {
  const ReadCeiling measured = MeasureReadCeiling(size_t{4} << 20, 2);
  ASSERT_EQ(measured.kernels.size(), 7u);
  ReadCeiling a = measured, b = measured;
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    a.kernels[i].gb_per_s = i % 2 == 0 ? 10.0 + i : 1.0;
    b.kernels[i].gb_per_s = i % 2 == 0 ? 2.0 : 20.0 + i;
  }
  const ReadCeiling both = MaxOf(a, b);
  for (size_t i = 0; i < both.kernels.size(); ++i) {
    EXPECT_EQ(both.kernels[i].gb_per_s, i % 2 == 0 ? 10.0 + i : 20.0 + i) << i;
  }
  EXPECT_EQ(both.gb_per_s, 25.0);  // kernel 5, from b
  EXPECT_EQ(both.best_kernel, measured.kernels[5].name);
}

TEST(ReadProbeTest, TheKernelWithTheBestMedianIsNotTheOneALuckyPassLifted) {
  const ReadCeiling form = MeasureReadCeiling(size_t{1} << 20, 1);
  // Kernel 1 reads 10 GB/s steadily; kernel 4 reads 8 except for one pass of 50.
  std::vector<ReadCeiling> passes(5, form);
  for (size_t p = 0; p < passes.size(); ++p) {
    for (size_t k = 0; k < form.kernels.size(); ++k) passes[p].kernels[k].gb_per_s = 1.0 + 0.1 * k;
    passes[p].kernels[1].gb_per_s = 10.0;
    passes[p].kernels[4].gb_per_s = p == 2 ? 50.0 : 8.0;
  }
  EXPECT_EQ(KernelWithBestMedian(passes), 1u);
  passes[0].kernels[4].gb_per_s = passes[1].kernels[4].gb_per_s = 50.0;  // now three of five
  EXPECT_EQ(KernelWithBestMedian(passes), 4u);
  EXPECT_EQ(KernelWithBestMedian({passes[3]}), 1u);  // one pass: its own best
}

}  // namespace
}  // namespace splitspec::engine::cpu
