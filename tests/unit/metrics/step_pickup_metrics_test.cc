// StepPickupMetrics: every method and wait has its series from the start, each pickup lands in
// its own, and the observer the services hand their step sockets records through it.
#include <string>

#include "common/metrics/step_pickup_metrics.h"
#include "common/metrics/step_pickup_observer.h"
#include "gtest/gtest.h"
#include "tests/unit/metrics/registry_exposition.h"

namespace splitspec::metrics {
namespace {

using testing::Bucket;
using testing::Exposition;
using testing::Parse;

const std::string kAnswers = "splitspec_step_answer_pickup_seconds";
const std::string kRequests = "splitspec_step_request_pickup_seconds";

TEST(StepPickupMetricsTest, EverySeriesExistsBeforeAnyPickup) {
  MetricsRegistry registry;
  auto answers = StepPickupMetrics::Create(registry, StepPickupMetrics::Frames::kAnswers);
  ASSERT_TRUE(answers.ok()) << answers.status();
  const Exposition e = Parse(registry);
  for (std::string_view method : kPickupMethods) {
    for (std::string_view wait : kPickupWaits) {
      EXPECT_EQ(e.Value(kAnswers + "_count", {{"method", std::string(method)}, {"wait", std::string(wait)}}), 0.0)
          << method << " " << wait;
    }
  }
  EXPECT_FALSE(e.Value(kRequests + "_count", {{"method", "verify"}, {"wait", "ready"}}).has_value());
}

TEST(StepPickupMetricsTest, EachPickupLandsInItsMethodAndWait) {
  MetricsRegistry registry;
  auto requests = StepPickupMetrics::Create(registry, StepPickupMetrics::Frames::kRequests);
  ASSERT_TRUE(requests.ok()) << requests.status();
  (*requests)->Observe("verify", "spinning", 0.000003);
  (*requests)->Observe("verify", "asleep_after_window", 0.00015);
  (*requests)->Observe("propose", "asleep_before_window", 0.00009);
  (*requests)->Observe("release", "ready", 0.000001);  // not a listed method: "other"
  (*requests)->Observe("verify", "dozing", 0.001);      // not a listed wait: dropped
  const Exposition e = Parse(registry);
  EXPECT_EQ(e.Value(kRequests + "_count", {{"method", "verify"}, {"wait", "spinning"}}), 1.0);
  EXPECT_EQ(Bucket(e, kRequests, {{"method", "verify"}, {"wait", "spinning"}}, 0.000002), 0.0);
  EXPECT_EQ(Bucket(e, kRequests, {{"method", "verify"}, {"wait", "spinning"}}, 0.000005), 1.0);
  EXPECT_EQ(Bucket(e, kRequests, {{"method", "verify"}, {"wait", "asleep_after_window"}}, 0.0001), 0.0);
  EXPECT_EQ(Bucket(e, kRequests, {{"method", "verify"}, {"wait", "asleep_after_window"}}, 0.0002), 1.0);
  EXPECT_EQ(e.Value(kRequests + "_count", {{"method", "propose"}, {"wait", "asleep_before_window"}}), 1.0);
  EXPECT_EQ(e.Value(kRequests + "_count", {{"method", "other"}, {"wait", "ready"}}), 1.0);
  double total = 0;
  for (std::string_view method : kPickupMethods) {
    for (std::string_view wait : kPickupWaits) {
      total += e.Value(kRequests + "_count", {{"method", std::string(method)}, {"wait", std::string(wait)}}).value_or(0);
    }
  }
  EXPECT_EQ(total, 4.0);
}

TEST(StepPickupMetricsTest, TheStepSocketObserverRecordsMethodWaitAndLatency) {
  MetricsRegistry registry;
  auto answers = StepPickupMetrics::Create(registry, StepPickupMetrics::Frames::kAnswers);
  ASSERT_TRUE(answers.ok()) << answers.status();
  const rpc::PickupObserver observe = RecordPickupsIn(answers->get());
  ASSERT_TRUE(observe);
  observe(rpc::StepMethod::kProposeCompact,
          rpc::FramePickup{rpc::FramePickup::Wait::kAsleepBeforeWindow, absl::Microseconds(120)});
  observe(rpc::StepMethod::kVerifyCompact, rpc::FramePickup{rpc::FramePickup::Wait::kSpinning, absl::Microseconds(4)});
  const Exposition e = Parse(registry);
  EXPECT_EQ(e.Value(kAnswers + "_count", {{"method", "propose"}, {"wait", "asleep_before_window"}}), 1.0);
  EXPECT_DOUBLE_EQ(*e.Value(kAnswers + "_sum", {{"method", "propose"}, {"wait", "asleep_before_window"}}), 0.00012);
  EXPECT_EQ(e.Value(kAnswers + "_count", {{"method", "verify"}, {"wait", "spinning"}}), 1.0);
  EXPECT_FALSE(RecordPickupsIn(nullptr));
}

}  // namespace
}  // namespace splitspec::metrics
