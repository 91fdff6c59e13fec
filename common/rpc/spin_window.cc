// Spin windows of the step socket (see spin_window.h).
#include "common/rpc/spin_window.h"

#include <algorithm>

namespace splitspec::rpc {

absl::Duration RecentMedian::Get() const {
  if (observed_ == 1) return recent_[0];
  if (observed_ == 2) return std::min(recent_[0], recent_[1]);
  const auto [a, b, c] = recent_;
  return std::max(std::min(a, b), std::min(std::max(a, b), c));
}

void RecentMedian::Observe(absl::Duration d) {
  recent_[observed_ % 3] = d;
  // Wraps within 3..5, so the slot index and "seen three" both stay right for ever.
  observed_ = observed_ >= 5 ? 3 : observed_ + 1;
}

absl::Duration WindowHalfWidth(absl::Duration margin, const RecentMedian& misses, absl::Duration expected) {
  if (misses.empty()) return margin;
  return std::max(margin, std::min({2 * misses.Get(), expected / 4, kMaxWindowMargins * margin}));
}

namespace {

// Records how far `observed` fell from what `recent` predicted for it, then `observed` itself.
void ObserveWithMiss(absl::Duration observed, RecentMedian* recent, RecentMedian* misses) {
  if (!recent->empty()) misses->Observe(absl::AbsDuration(observed - recent->Get()));
  recent->Observe(observed);
}

}  // namespace

SpinWindow AnswerSpin::Window(absl::Time sent) const {
  if (margin_ <= absl::ZeroDuration() || round_trips_.empty()) return SpinWindow{};
  const absl::Duration expected = round_trips_.Get();
  const absl::Duration half = WindowHalfWidth(margin_, misses_, expected);
  return SpinWindow{sent + expected - half, sent + expected + half};
}

void AnswerSpin::Observe(absl::Duration round_trip) { ObserveWithMiss(round_trip, &round_trips_, &misses_); }

SpinWindow RequestSpin::Window(absl::Time answered) const {
  if (margin_ <= absl::ZeroDuration()) return SpinWindow{};
  if (long_gaps_.empty()) return SpinWindow{answered, answered + margin_};
  // Polling from the answer until a long gap's request is due would cost a CPU for the whole
  // gap (a drafter's between serial steps is a verify call): sleep until just before it.
  const absl::Duration expected = long_gaps_.Get();
  const absl::Duration half = WindowHalfWidth(margin_, long_misses_, expected);
  const absl::Time later_from = std::max(answered, answered + expected - half);
  const absl::Time later_until = answered + expected + half;
  if (gaps_since_prompt_ >= kPromptGapMemory) return SpinWindow{later_from, later_until};
  const absl::Time prompt_until = answered + margin_;
  // The two stretches meet: one.
  if (later_from <= prompt_until) return SpinWindow{answered, std::max(prompt_until, later_until)};
  return SpinWindow{answered, prompt_until, later_from, later_until};
}

void RequestSpin::Observe(absl::Duration gap) {
  if (gap <= margin_) {
    gaps_since_prompt_ = 0;
    return;
  }
  gaps_since_prompt_ = std::min(gaps_since_prompt_ + 1, kPromptGapMemory);
  ObserveWithMiss(gap, &long_gaps_, &long_misses_);
}

}  // namespace splitspec::rpc
