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

SpinWindow AnswerSpin::Window(absl::Time sent) const {
  if (margin_ <= absl::ZeroDuration() || round_trips_.empty()) return SpinWindow{};
  const absl::Time due = sent + round_trips_.Get();
  return SpinWindow{due - margin_, due + margin_};
}

void AnswerSpin::Observe(absl::Duration round_trip) { round_trips_.Observe(round_trip); }

SpinWindow RequestSpin::Window(absl::Time answered) const {
  if (margin_ <= absl::ZeroDuration()) return SpinWindow{};
  if (gaps_.empty()) return SpinWindow{answered, answered + margin_};
  // Polling from the answer until the request is due would cost a CPU for the whole gap (a
  // drafter's between serial steps is a verify call): sleep until just before it.
  const absl::Time due = answered + gaps_.Get();
  return SpinWindow{std::max(answered, due - margin_), due + margin_};
}

}  // namespace splitspec::rpc
