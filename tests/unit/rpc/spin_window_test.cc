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

TEST(RequestSpinTest, RequestsThatFollowAtOncePollForTheMarginAfterTheAnswer) {
  RequestSpin spin(absl::Microseconds(300));
  for (int i = 0; i < 20; ++i) spin.Observe(absl::Microseconds(120));
  const SpinWindow w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent);
  EXPECT_EQ(w.until, kSent + absl::Microseconds(300));
  EXPECT_EQ(w.later_from, absl::InfiniteFuture());
}

TEST(RequestSpinTest, SleepsThroughALongGapAndPollsAroundWhenTheNextRequestIsDue) {
  RequestSpin spin(absl::Microseconds(300));
  // A drafter between serial steps: its requests come a verify call (7 ms) after its answers,
  // and it never polls right after an answer.
  spin.Observe(absl::Milliseconds(7));
  SpinWindow w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent + absl::Milliseconds(7) - absl::Microseconds(300));
  EXPECT_EQ(w.until, kSent + absl::Milliseconds(7) + absl::Microseconds(300));
  EXPECT_EQ(w.later_from, absl::InfiniteFuture());
  // Gaps that wander (7.5, 6.5 ms: misses 0.5 ms) widen it to twice the recent misses.
  spin.Observe(absl::Microseconds(7500));
  spin.Observe(absl::Microseconds(6500));
  spin.Observe(absl::Milliseconds(7));
  w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent + absl::Milliseconds(6));
  EXPECT_EQ(w.until, kSent + absl::Milliseconds(8));
  for (int i = 0; i < 3; ++i) spin.Observe(absl::Milliseconds(7));
  EXPECT_EQ(spin.Window(kSent).from, kSent + absl::Milliseconds(7) - absl::Microseconds(300));
  // One late request (an idle router) among three does not move it.
  spin.Observe(absl::Seconds(5));
  EXPECT_EQ(spin.Window(kSent).from, kSent + absl::Milliseconds(7) - absl::Microseconds(300));
}

TEST(RequestSpinTest, RequestsThatComeAtOnceOrAfterALongGapArePolledForBoth) {
  // The verifier with the pipeline: 60 us after a step whose draft made ahead held, 1.3 ms (a
  // serial Propose) after one that missed, in no fixed order. One window around the median
  // of the last three gaps would sit on one kind or the other.
  RequestSpin spin(absl::Microseconds(300));
  for (int us : {60, 1300, 1300, 60, 1300, 60, 60, 1300}) spin.Observe(absl::Microseconds(us));
  SpinWindow w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent);
  EXPECT_EQ(w.until, kSent + absl::Microseconds(300));
  EXPECT_EQ(w.later_from, kSent + absl::Microseconds(1000));
  EXPECT_EQ(w.later_until, kSent + absl::Microseconds(1600));
  EXPECT_TRUE(w.Contains(kSent + absl::Microseconds(60)));
  EXPECT_TRUE(w.Contains(kSent + absl::Microseconds(1300)));
  EXPECT_FALSE(w.Contains(kSent + absl::Microseconds(600)));  // asleep between the two
  EXPECT_EQ(w.NextStart(kSent + absl::Microseconds(600)), kSent + absl::Microseconds(1000));
  EXPECT_FALSE(w.Closed(kSent + absl::Microseconds(600)));
  EXPECT_TRUE(w.Closed(kSent + absl::Microseconds(1600)));
  // Until kPromptGapMemory long gaps in a row have come (the last above was the first), the
  // stretch after the answer stays; then it goes, and the worker sleeps until the long gap's
  // request is due.
  for (int i = 0; i < kPromptGapMemory - 2; ++i) spin.Observe(absl::Microseconds(1300));
  EXPECT_EQ(spin.Window(kSent).from, kSent);
  spin.Observe(absl::Microseconds(1300));
  w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent + absl::Microseconds(1000));
  EXPECT_EQ(w.until, kSent + absl::Microseconds(1600));
  EXPECT_EQ(w.later_from, absl::InfiniteFuture());
  // One request at once brings it back.
  spin.Observe(absl::Microseconds(60));
  EXPECT_EQ(spin.Window(kSent).from, kSent);
  EXPECT_EQ(spin.Window(kSent).later_from, kSent + absl::Microseconds(1000));
}

TEST(RequestSpinTest, StretchesThatMeetAreOne) {
  RequestSpin spin(absl::Microseconds(300));
  // Long gaps of 500 us: their stretch starts at 200 us, inside the one after the answer.
  for (int us : {60, 500, 500, 500}) spin.Observe(absl::Microseconds(us));
  const SpinWindow w = spin.Window(kSent);
  EXPECT_EQ(w.from, kSent);
  EXPECT_EQ(w.until, kSent + absl::Microseconds(800));
  EXPECT_EQ(w.later_from, absl::InfiniteFuture());
  EXPECT_FALSE(w.Closed(kSent + absl::Microseconds(799)));
  EXPECT_TRUE(w.Closed(kSent + absl::Microseconds(800)));
}

TEST(SpinWindowTest, NoWindowHasNoStretchAndIsNeverClosed) {
  const SpinWindow none;
  EXPECT_FALSE(none.Contains(kSent));
  EXPECT_EQ(none.NextStart(kSent), absl::InfiniteFuture());
  EXPECT_FALSE(none.Closed(kSent));
}

}  // namespace
}  // namespace splitspec::rpc
