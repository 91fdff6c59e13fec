// How a step socket's reader came by a frame that went through the connection's shared memory
// (step_memory.h): how it was waiting when the frame was published, and how long after that it
// had the frame in hand.
//
// Why: a frame read by a thread that was polling is in hand within microseconds, one read by a
// thread asleep in the kernel only once the kernel has woken it, which on a virtual machine
// whose CPU had halted took 55-170 (docs/benchmarks.md, "How a step's hand-overs were waited
// for"). Which of the two a speculative step's four hand-overs were, and how often a frame came
// outside the window where its reader polls (spin_window.h), is much of its overhead beyond the
// workers' compute; the services export it (splitspec_step_answer_pickup_seconds on the router,
// splitspec_step_request_pickup_seconds on the workers) so that --step-spin-us can be judged on
// a deployment's own machines.
#ifndef SPLITSPEC_COMMON_RPC_FRAME_PICKUP_H_
#define SPLITSPEC_COMMON_RPC_FRAME_PICKUP_H_

#include <functional>
#include <string_view>

#include "absl/time/time.h"
#include "common/rpc/step_socket_wire.h"

namespace splitspec::rpc {

struct FramePickup {
  // Numbered from 0 in this order (StepPickupMetrics indexes its series by them).
  enum class Wait {
    kReady,               // published before the reader first looked
    kSpinning,            // published while the reader polled inside its window
    kAsleepBeforeWindow,  // published while the reader slept before its window (or had none)
    kAsleepAfterWindow,   // published after the reader's window had closed and it slept again
  };
  static constexpr int kNumWaits = 4;

  Wait wait = Wait::kReady;
  // From the writer's publishing to the reader's having the frame (both ends on one host read
  // one steady clock).
  absl::Duration latency = absl::ZeroDuration();
};

// The metric label of each wait.
inline std::string_view WaitName(FramePickup::Wait wait) {
  switch (wait) {
    case FramePickup::Wait::kReady: return "ready";
    case FramePickup::Wait::kSpinning: return "spinning";
    case FramePickup::Wait::kAsleepBeforeWindow: return "asleep_before_window";
    case FramePickup::Wait::kAsleepAfterWindow: return "asleep_after_window";
  }
  return "ready";
}

// The metric label of a call's method: the compact and protobuf forms of a call are one call.
inline std::string_view PickupMethodName(StepMethod method) {
  switch (method) {
    case StepMethod::kVerify:
    case StepMethod::kVerifyCompact: return "verify";
    case StepMethod::kPropose:
    case StepMethod::kProposeCompact: return "propose";
    default: return "other";
  }
}

// Called on the reading thread for every frame read through shared memory whose writer stamped
// it (a writer that predates the stamp leaves none), with the method of the call it belongs to.
// Must be quick: the reader has the frame's work to do.
using PickupObserver = std::function<void(StepMethod method, const FramePickup& pickup)>;

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_FRAME_PICKUP_H_
