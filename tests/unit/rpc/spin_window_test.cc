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

// Where a window is centred: when the frame is due.
absl::Time Centre(const SpinWindow& w) { return w.from + (w.until - w.from) / 2; }

TEST(AnswerSpinTest, CentresTheWindowOnTheMedianOfTheLastThreeRoundTrips) {
  AnswerSpin spin(absl::Microseconds(300));
  spin.Observe(absl::Milliseconds(7));
  SpinWindow w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent + absl::Milliseconds(7) - absl::Microseconds(300));
  EXPECT_EQ(w.until, kSent + absl::Milliseconds(7) + absl::Microseconds(300));
  // Two seen: the shorter (spinning early costs less than waking late).
  spin.Observe(absl::Milliseconds(9));
  EXPECT_EQ(Centre(spin.Window(kSent)), kSent + absl::Milliseconds(7));
  // One slow step (a prefill beside it) among three does not move the window.
  spin.Observe(absl::Milliseconds(40));
  EXPECT_EQ(Centre(spin.Window(kSent)), kSent + absl::Milliseconds(9));
  // The oldest goes first: 9, 40, 8 -> 9; then 40, 8, 8 -> 8.
  spin.Observe(absl::Milliseconds(8));
  EXPECT_EQ(Centre(spin.Window(kSent)), kSent + absl::Milliseconds(9));
  spin.Observe(absl::Milliseconds(8));
  EXPECT_EQ(Centre(spin.Window(kSent)), kSent + absl::Milliseconds(8));
}

TEST(AnswerSpinTest, FollowsAChangedStepTimeAfterManyCalls) {
  AnswerSpin spin(absl::Microseconds(100));
  for (int i = 0; i < 1000; ++i) spin.Observe(absl::Milliseconds(5));
  EXPECT_EQ(spin.Window(kSent).from, kSent + absl::Milliseconds(5) - absl::Microseconds(100));
  for (int i = 0; i < 2; ++i) spin.Observe(absl::Milliseconds(2));
  const SpinWindow w = spin.Window(kSent);
  EXPECT_EQ(Centre(w), kSent + absl::Milliseconds(2));
  // Just after the change the recent misses are 3 ms: the window is as wide as a quarter of
  // the round trip allows.
  EXPECT_EQ(w.until - w.from, 2 * absl::Microseconds(500));
  // Once three round trips agree again, back to the margin.
  for (int i = 0; i < 3; ++i) spin.Observe(absl::Milliseconds(2));
  EXPECT_EQ(spin.Window(kSent).until - spin.Window(kSent).from, 2 * absl::Microseconds(100));
}

TEST(AnswerSpinTest, WanderingRoundTripsWidenTheWindowToTwiceTheRecentMisses) {
  AnswerSpin spin(absl::Microseconds(300));
  for (int i = 0; i < 3; ++i) spin.Observe(absl::Milliseconds(10));
  EXPECT_EQ(spin.Window(kSent).until - spin.Window(kSent).from, 2 * absl::Microseconds(300));
  // Each of the next two lands 0.5 ms from the 10 ms predicted for it: misses 0, 0.5, 0.5.
  spin.Observe(absl::Microseconds(10500));
  spin.Observe(absl::Microseconds(9500));
  SpinWindow w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent + absl::Milliseconds(9));
  EXPECT_EQ(w.until, kSent + absl::Milliseconds(11));
  // Misses under the margin leave the margin.
  AnswerSpin steady(absl::Microseconds(300));
  for (int d : {10000, 10100, 9900, 10050, 9950}) steady.Observe(absl::Microseconds(d));
  w = steady.Window(kSent);
  EXPECT_EQ(w.until - w.from, 2 * absl::Microseconds(300));
}

TEST(AnswerSpinTest, NeverReachesMoreThanAQuarterOfTheRoundTripOrEightMarginsToEachSide) {
  AnswerSpin spin(absl::Microseconds(300));
  // 4, 8, 4, 8 ms: misses 4, 0, 4 -> 4 ms, twice that is 8; the round trip due is 8 ms.
  for (int ms : {4, 8, 4, 8}) spin.Observe(absl::Milliseconds(ms));
  const SpinWindow w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent + absl::Milliseconds(6));
  EXPECT_EQ(w.until, kSent + absl::Milliseconds(10));
  // Nor more than eight margins: 40 / 80 ms round trips with a 100 us margin poll 0.8 ms to
  // each side, not 20.
  AnswerSpin slow(absl::Microseconds(100));
  for (int ms : {40, 80, 40, 80}) slow.Observe(absl::Milliseconds(ms));
  EXPECT_EQ(slow.Window(kSent).from, kSent + absl::Milliseconds(80) - absl::Microseconds(800));
  EXPECT_EQ(slow.Window(kSent).until, kSent + absl::Milliseconds(80) + absl::Microseconds(800));
  // The margin still holds where a quarter is less: 400 us round trips that wander.
  AnswerSpin quick(absl::Microseconds(300));
  for (int us : {200, 400, 200, 400}) quick.Observe(absl::Microseconds(us));
  EXPECT_EQ(quick.Window(kSent).until - quick.Window(kSent).from, 2 * absl::Microseconds(300));
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
  // The first of them missed the 120 us predicted by far, which widens the window until three
  // misses in a row are small again.
  for (int i = 0; i < 3; ++i) spin.Observe(absl::Milliseconds(7));
  w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent + absl::Milliseconds(7) - absl::Microseconds(1750));
  EXPECT_EQ(w.until, kSent + absl::Milliseconds(7) + absl::Microseconds(1750));
  for (int i = 0; i < 2; ++i) spin.Observe(absl::Milliseconds(7));
  w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent + absl::Milliseconds(7) - absl::Microseconds(300));
  EXPECT_EQ(w.until, kSent + absl::Milliseconds(7) + absl::Microseconds(300));
  // One late request (an idle router) among three does not move it.
  spin.Observe(absl::Seconds(5));
  EXPECT_EQ(spin.Window(kSent).from, kSent + absl::Milliseconds(7) - absl::Microseconds(300));
}

}  // namespace
}  // namespace splitspec::rpc
