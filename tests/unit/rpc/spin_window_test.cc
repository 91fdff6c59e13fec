// Spin windows (common/rpc/spin_window.h): where the caller polls for an answer and when a
// worker polls for the next request, as pure functions of the observed times.
#include "common/rpc/spin_window.h"

#include "gtest/gtest.h"

namespace splitspec::rpc {
namespace {

const absl::Time kSent = absl::FromUnixSeconds(1000);

TEST(AnswerSpinTest, NoWindowBeforeARoundTripWasSeenOrWithZeroMargin) {
  AnswerSpin spin(absl::Microseconds(300));
  const SpinWindow none = spin.Window(kSent);
  EXPECT_EQ(none.from, absl::InfiniteFuture());
  EXPECT_EQ(none.until, absl::InfinitePast());
  AnswerSpin off(absl::ZeroDuration());
  off.Observe(absl::Milliseconds(7));
  EXPECT_EQ(off.Window(kSent).from, absl::InfiniteFuture());
}

TEST(AnswerSpinTest, CentresTheWindowOnTheMedianOfTheLastThreeRoundTrips) {
  AnswerSpin spin(absl::Microseconds(300));
  spin.Observe(absl::Milliseconds(7));
  SpinWindow w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent + absl::Milliseconds(7) - absl::Microseconds(300));
  EXPECT_EQ(w.until, kSent + absl::Milliseconds(7) + absl::Microseconds(300));
  // Two seen: the shorter (spinning early costs less than waking late).
  spin.Observe(absl::Milliseconds(9));
  EXPECT_EQ(spin.Window(kSent).from, kSent + absl::Milliseconds(7) - absl::Microseconds(300));
  // One slow step (a prefill beside it) among three does not move the window.
  spin.Observe(absl::Milliseconds(40));
  EXPECT_EQ(spin.Window(kSent).from, kSent + absl::Milliseconds(9) - absl::Microseconds(300));
  // The oldest goes first: 9, 40, 8 -> 9; then 40, 8, 8 -> 8.
  spin.Observe(absl::Milliseconds(8));
  EXPECT_EQ(spin.Window(kSent).from, kSent + absl::Milliseconds(9) - absl::Microseconds(300));
  spin.Observe(absl::Milliseconds(8));
  EXPECT_EQ(spin.Window(kSent).from, kSent + absl::Milliseconds(8) - absl::Microseconds(300));
}

TEST(AnswerSpinTest, FollowsAChangedStepTimeAfterManyCalls) {
  AnswerSpin spin(absl::Microseconds(100));
  for (int i = 0; i < 1000; ++i) spin.Observe(absl::Milliseconds(5));
  for (int i = 0; i < 2; ++i) spin.Observe(absl::Milliseconds(2));
  const SpinWindow w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent + absl::Milliseconds(2) - absl::Microseconds(100));
  EXPECT_EQ(w.until, kSent + absl::Milliseconds(2) + absl::Microseconds(100));
}

TEST(RequestSpinTest, BeforeAnyGapPollsRightAfterTheAnswer) {
  RequestSpin spin(absl::Microseconds(300));
  // Nothing seen yet: a router's next step usually follows at once.
  const SpinWindow w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent);
  EXPECT_EQ(w.until, kSent + absl::Microseconds(300));
  RequestSpin off(absl::ZeroDuration());
  EXPECT_EQ(off.Window(kSent).from, absl::InfiniteFuture());
  off.Observe(absl::Microseconds(80));
  EXPECT_EQ(off.Window(kSent).from, absl::InfiniteFuture());
}

TEST(RequestSpinTest, SleepsThroughALongGapAndPollsAroundWhenTheNextRequestIsDue) {
  RequestSpin spin(absl::Microseconds(300));
  // Requests that follow at once: poll from the answer (the window cannot start before it).
  spin.Observe(absl::Microseconds(120));
  SpinWindow w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent);
  EXPECT_EQ(w.until, kSent + absl::Microseconds(420));
  // A drafter between serial steps: its requests come a verify call (7 ms) after its answers.
  for (int i = 0; i < 3; ++i) spin.Observe(absl::Milliseconds(7));
  w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent + absl::Milliseconds(7) - absl::Microseconds(300));
  EXPECT_EQ(w.until, kSent + absl::Milliseconds(7) + absl::Microseconds(300));
  // One late request (an idle router) among three does not move it.
  spin.Observe(absl::Seconds(5));
  EXPECT_EQ(spin.Window(kSent).from, kSent + absl::Milliseconds(7) - absl::Microseconds(300));
}

}  // namespace
}  // namespace splitspec::rpc
