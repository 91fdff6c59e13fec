// Spin windows of the step socket (see spin_window.h).
#include "common/rpc/spin_window.h"

#include <algorithm>

namespace splitspec::rpc {

SpinWindow AnswerSpin::Window(absl::Time sent) const {
  if (margin_ <= absl::ZeroDuration() || observed_ == 0) return SpinWindow{};
  // The median of what was seen (of the last three): one outlier, such as a step that also
  // prefilled a new request, does not move the window.
  absl::Duration expected = recent_[0];
  if (observed_ == 2) expected = std::min(recent_[0], recent_[1]);
  if (observed_ >= 3) {
    const auto [a, b, c] = recent_;
    expected = std::max(std::min(a, b), std::min(std::max(a, b), c));
  }
  const absl::Time due = sent + expected;
  return SpinWindow{due - margin_, due + margin_};
}

void AnswerSpin::Observe(absl::Duration round_trip) {
  recent_[observed_ % 3] = round_trip;
  // Wraps within 3..5, so the slot index and "seen three" both stay right for ever.
  observed_ = observed_ >= 5 ? 3 : observed_ + 1;
}

SpinWindow RequestSpin::Window(absl::Time answered) const {
  // A caller whose next request came late last time (a drafter between serial steps, an idle
  // router) would only cost a CPU for the margin: sleep instead.
  if (margin_ <= absl::ZeroDuration() || last_gap_ > margin_) return SpinWindow{};
  return SpinWindow{answered, answered + margin_};
}

}  // namespace splitspec::rpc
