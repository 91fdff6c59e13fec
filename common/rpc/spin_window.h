// When a step socket reader polls instead of sleeping (step_socket_wire.h, SpinWindow).
//
// A thread that sleeps in poll() through a worker's forward wakes slowly when the answer comes:
// on a virtual machine its virtual CPU has halted, and the host must deliver an interrupt and
// schedule it again (about 100 us on the 2-core VM of docs/benchmarks.md, against a few us for
// a thread that is polling). Polling for the whole forward would cost a CPU for nothing, so each
// side polls only in a short window where the next frame is likely:
//   - the caller (router) around when its answer is due: the median of the method's last three
//     round trips;
//   - the connection thread (worker) around when the next request is due: the median of the
//     last three gaps from an answer to the next request that were longer than the margin. A
//     worker whose requests come in a steady rhythm (the verifier while the drafter drafts, the
//     drafter while the target verifies) sleeps through the gap and wakes before the request
//     does. One whose recent requests also came at once polls right after its answer too
//     (RequestSpin).
// Either window reaches the margin to each side of when the frame is due, or, where the times
// wander more than that (a verify call's forward moves by several per cent from step to step on
// a busy host), twice the recent misses (WindowHalfWidth).
// A frame that comes outside its window is read exactly as before; only the wake-up is slower.
#ifndef SPLITSPEC_COMMON_RPC_SPIN_WINDOW_H_
#define SPLITSPEC_COMMON_RPC_SPIN_WINDOW_H_

#include <array>

#include "absl/time/time.h"
#include "common/rpc/step_socket_wire.h"

namespace splitspec::rpc {

// The services' --step-spin-us default. On the 2-core VM of docs/benchmarks.md the router's
// polling took a plain step's overhead from 202-207 to 104-113 us p50 at one client in the same
// run, for 130-150 us more of its CPU a step (at most twice the margin a call).
inline constexpr int kDefaultStepSpinMicros = 300;

// The median of the last three durations observed (of two: the shorter, since spinning early
// costs less than waking late). One outlier, such as a step that also prefilled a new request,
// does not move it.
class RecentMedian {
 public:
  bool empty() const { return observed_ == 0; }
  absl::Duration Get() const;
  void Observe(absl::Duration d);

 private:
  std::array<absl::Duration, 3> recent_{};
  int observed_ = 0;
};

// How far to each side of when a frame is due the window reaches: the margin, or twice the
// recent misses (the median of how far each of the last three durations fell from the median
// predicted before it) where they are wider (on the verify calls timed in docs/benchmarks.md,
// twice the median miss covered about three in four); never more than a quarter of the expected duration, since polling
// through a whole call would cost a CPU for it, nor more than kMaxWindowMargins margins, so
// that the margin still bounds the CPU a call may spend polling (a worker whose gaps are
// seconds that wander, under sparse traffic, polls for milliseconds, not seconds).
inline constexpr int kMaxWindowMargins = 8;
absl::Duration WindowHalfWidth(absl::Duration margin, const RecentMedian& misses, absl::Duration expected);

// The caller's side: where the answer to a call sent at `sent` is expected.
class AnswerSpin {
 public:
  // `margin` zero: never spins.
  explicit AnswerSpin(absl::Duration margin) : margin_(margin) {}

  // No window until a round trip was observed.
  SpinWindow Window(absl::Time sent) const;
  // A call's round trip (request written to answer read).
  void Observe(absl::Duration round_trip);

 private:
  const absl::Duration margin_;
  RecentMedian round_trips_;
  RecentMedian misses_;
};

// The worker's side: where the next request after an answer is expected. Its gaps may come in
// two kinds: the verifier's, with the pipeline, are the router's turnaround (tens of
// microseconds) after a step whose draft made ahead held, and a serial Propose's round trip
// (a millisecond or more) after one whose draft missed. One window around the median gap then
// sits on one kind and lets the other find the worker asleep (half of the verifier's requests
// on the 2-core VM of docs/benchmarks.md). So the gaps within the margin and the longer ones
// are told apart: while a gap within the margin was among the last kPromptGapMemory, the worker
// polls for the margin right after its answer; and it polls around the median of the recent
// longer gaps, if any, as a second stretch.
inline constexpr int kPromptGapMemory = 8;

class RequestSpin {
 public:
  // `margin` zero: never spins.
  explicit RequestSpin(absl::Duration margin) : margin_(margin) {}

  // Before any gap was seen: right after the answer (a router's next step usually follows at
  // once).
  SpinWindow Window(absl::Time answered) const;
  // The time from an answer to the next request's arrival.
  void Observe(absl::Duration gap);

 private:
  const absl::Duration margin_;
  // Gaps longer than the margin, and how far each fell from the median predicted before it.
  RecentMedian long_gaps_;
  RecentMedian long_misses_;
  // Gaps seen since the last one within the margin, capped at kPromptGapMemory (where it
  // starts: before any gap the window is the margin after the answer anyway).
  int gaps_since_prompt_ = kPromptGapMemory;
};

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_SPIN_WINDOW_H_
