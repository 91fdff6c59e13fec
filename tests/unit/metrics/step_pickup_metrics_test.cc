// StepPickupMetrics: every method and wait has its series from the start, each pickup lands in
// its own, and the observer the services hand their step sockets records through it.
#include <string>

#include "common/metrics/step_pickup_metrics.h"
#include "gtest/gtest.h"
#include "tests/unit/metrics/registry_exposition.h"

namespace splitspec::metrics {
namespace {

using rpc::FramePickup;
using rpc::StepMethod;
using testing::Bucket;
using testing::Exposition;
using testing::Parse;
using Wait = FramePickup::Wait;

const std::string kAnswers = "splitspec_step_answer_pickup_seconds";
const std::string kRequests = "splitspec_step_request_pickup_seconds";
const char* const kMethods[] = {"verify", "propose", "other"};
const char* const kWaits[] = {"ready", "spinning", "asleep_before_window", "asleep_after_window"};

TEST(StepPickupMetricsTest, EverySeriesExistsBeforeAnyPickup) {
  MetricsRegistry registry;
  auto answers = StepPickupMetrics::Create(registry, StepPickupMetrics::Frames::kAnswers);
  ASSERT_TRUE(answers.ok()) << answers.status();
  const Exposition e = Parse(registry);
  for (const char* method : kMethods) {
    for (const char* wait : kWaits) {
      EXPECT_EQ(e.Value(kAnswers + "_count", {{"method", method}, {"wait", wait}}), 0.0) << method << " " << wait;
    }
  }
  EXPECT_FALSE(e.Value(kRequests + "_count", {{"method", "verify"}, {"wait", "ready"}}).has_value());
}

TEST(StepPickupMetricsTest, EachPickupLandsInItsMethodAndWait) {
  MetricsRegistry registry;
  auto requests = StepPickupMetrics::Create(registry, StepPickupMetrics::Frames::kRequests);
  ASSERT_TRUE(requests.ok()) << requests.status();
  (*requests)->Observe(StepMethod::kVerifyCompact, FramePickup{Wait::kSpinning, absl::Microseconds(3)});
  (*requests)->Observe(StepMethod::kVerify, FramePickup{Wait::kAsleepAfterWindow, absl::Microseconds(150)});
  (*requests)->Observe(StepMethod::kProposeCompact, FramePickup{Wait::kAsleepBeforeWindow, absl::Microseconds(90)});
  (*requests)->Observe(StepMethod::kRelease, FramePickup{Wait::kReady, absl::Microseconds(1)});  // "other"
  const Exposition e = Parse(registry);
  EXPECT_EQ(e.Value(kRequests + "_count", {{"method", "verify"}, {"wait", "spinning"}}), 1.0);
  EXPECT_EQ(Bucket(e, kRequests, {{"method", "verify"}, {"wait", "spinning"}}, 0.000002), 0.0);
  EXPECT_EQ(Bucket(e, kRequests, {{"method", "verify"}, {"wait", "spinning"}}, 0.000005), 1.0);
  EXPECT_EQ(Bucket(e, kRequests, {{"method", "verify"}, {"wait", "asleep_after_window"}}, 0.0001), 0.0);
  EXPECT_EQ(Bucket(e, kRequests, {{"method", "verify"}, {"wait", "asleep_after_window"}}, 0.0002), 1.0);
  EXPECT_EQ(e.Value(kRequests + "_count", {{"method", "propose"}, {"wait", "asleep_before_window"}}), 1.0);
  EXPECT_DOUBLE_EQ(*e.Value(kRequests + "_sum", {{"method", "propose"}, {"wait", "asleep_before_window"}}), 0.00009);
  EXPECT_EQ(e.Value(kRequests + "_count", {{"method", "other"}, {"wait", "ready"}}), 1.0);
  double total = 0;
  for (const char* method : kMethods) {
    for (const char* wait : kWaits) {
      total += e.Value(kRequests + "_count", {{"method", method}, {"wait", wait}}).value_or(0);
    }
  }
  EXPECT_EQ(total, 4.0);
}

TEST(StepPickupMetricsTest, TheStepSocketObserverRecordsMethodWaitAndLatency) {
  MetricsRegistry registry;
  auto answers = StepPickupMetrics::Create(registry, StepPickupMetrics::Frames::kAnswers);
  ASSERT_TRUE(answers.ok()) << answers.status();
  const rpc::PickupObserver observe = (*answers)->Observer();
  ASSERT_TRUE(observe);
  observe(StepMethod::kProposeCompact, FramePickup{Wait::kAsleepBeforeWindow, absl::Microseconds(120)});
  observe(StepMethod::kVerifyCompact, FramePickup{Wait::kSpinning, absl::Microseconds(4)});
  const Exposition e = Parse(registry);
  EXPECT_EQ(e.Value(kAnswers + "_count", {{"method", "propose"}, {"wait", "asleep_before_window"}}), 1.0);
  EXPECT_DOUBLE_EQ(*e.Value(kAnswers + "_sum", {{"method", "propose"}, {"wait", "asleep_before_window"}}), 0.00012);
  EXPECT_EQ(e.Value(kAnswers + "_count", {{"method", "verify"}, {"wait", "spinning"}}), 1.0);
}

}  // namespace
}  // namespace splitspec::metrics
