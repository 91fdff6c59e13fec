// ShapeCalibration: expected against emitted tokens per pool and proposal shape.
#include "router/shape_calibration.h"

#include <gtest/gtest.h>

namespace splitspec::router {
namespace {

TEST(ShapeCalibrationTest, NamesChainsAndTrees) {
  EXPECT_EQ(ShapeCalibration::ShapeName(3, 3), "3");
  EXPECT_EQ(ShapeCalibration::ShapeName(3, 0), "3");
  EXPECT_EQ(ShapeCalibration::ShapeName(2, 4), "2:4");
}

TEST(ShapeCalibrationTest, KeepsShapesAndPoolsApartAndComparesMeans) {
  ShapeCalibration c;
  for (int i = 0; i < 100; ++i) {
    c.Observe("model", 2, 4, 2.5, i % 2 == 0 ? 2.0 : 3.0);  // mean 2.5: on target
    c.Observe("model", 3, 3, 2.5, 2.0);                      // a chain estimate running high
    c.Observe("ngram", 2, 4, 2.0, 3.0);
  }
  EXPECT_NEAR(c.Ratio("model", 2, 4).first, 1.0, 0.01);
  EXPECT_NEAR(c.Ratio("model", 3, 3).first, 0.8, 1e-9);
  EXPECT_NEAR(c.Ratio("ngram", 2, 4).first, 1.5, 1e-9);
  EXPECT_GT(c.Ratio("model", 3, 3).second, 50.0);
  const auto unseen = c.Ratio("model", 5, 16);
  EXPECT_EQ(unseen.first, 1.0);
  EXPECT_EQ(unseen.second, 0.0);
  const nlohmann::json d = c.Describe();
  EXPECT_NEAR(d["model"]["3"]["expected"].get<double>(), 2.5, 1e-9);
  EXPECT_NEAR(d["model"]["3"]["observed"].get<double>(), 2.0, 1e-9);
}

TEST(ShapeCalibrationTest, RecentStepsDominateAndSilentPoliciesAreIgnored) {
  ShapeCalibration c;
  for (int i = 0; i < 2000; ++i) c.Observe("p", 3, 3, 2.0, 2.0);
  for (int i = 0; i < 1000; ++i) c.Observe("p", 3, 3, 2.0, 3.0);
  EXPECT_GT(c.Ratio("p", 3, 3).first, 1.49);  // 0.995^1000 < 1%: the old steps are forgotten
  c.Observe("p", 4, 4, 0.0, 3.0);             // no expectation given: nothing to compare
  EXPECT_EQ(c.Ratio("p", 4, 4).second, 0.0);
  EXPECT_FALSE(c.Describe()["p"].contains("4"));
}

}  // namespace
}  // namespace splitspec::router
