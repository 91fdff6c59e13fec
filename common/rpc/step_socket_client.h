// The router's end of a worker's step socket (see step_socket_wire.h): one connection, made on
// first use and again after a failure, one call at a time, to a Unix socket path or to a TCP
// endpoint looked up as it connects (step_tcp.h).
//
// While a call waits, the calling thread polls instead of sleeping in a short window around
// when the answer is due (spin_window.h). Each connection asks the worker for shared memory
// first (step_memory.h) and sends its frames through it when the worker has some.
//
// Thread-safe: calls from several threads take turns on the connection.
#ifndef SPLITSPEC_COMMON_RPC_STEP_SOCKET_CLIENT_H_
#define SPLITSPEC_COMMON_RPC_STEP_SOCKET_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/frame_pickup.h"
#include "common/rpc/spin_window.h"
#include "common/rpc/step_memory.h"
#include "common/rpc/step_socket_wire.h"

namespace splitspec::rpc {

// How a call waits for its answer.
enum class AnswerWait {
  // Polls in a window around when the answer is due (AnswerSpin), learnt from the method's
  // earlier calls: the caller waits for this answer next.
  kPollWhenDue,
  // Sleeps until it comes, and leaves the method's window alone: a call made while another
  // call is in flight whose answer the caller needs first (a draft made ahead beside a verify
  // call), where polling would take a CPU from the workers for nothing.
  kSleep,
};

// A worker's TCP step endpoint, asked for each time the client connects: the port is learnt
// from the worker (GetInfo), and a restarted worker may have another. `token` is what the
// worker's step socket answers kIdentify with: a connection that reaches another worker (an
// address that balances connections) is closed unused.
struct TcpStepEndpoint {
  std::string host;
  int port = 0;
  uint64_t token = 0;
};
// NOT_FOUND: the worker serves none; the client then asks again only after kNoStepEndpointRetry.
using TcpStepEndpointLookup = std::function<absl::StatusOr<TcpStepEndpoint>()>;

class StepSocketClient {
 public:
  // How long after a worker said it has no TCP step endpoint the client asks again (each ask is
  // a gRPC call on the step's path).
  static constexpr absl::Duration kNoStepEndpointRetry = absl::Seconds(30);
  // The longest a TCP connect may take: a dropped SYN must not hold a step for its call's
  // whole deadline. The call then goes over gRPC.
  static constexpr absl::Duration kTcpConnectTimeout = absl::Milliseconds(500);

  // `spin_margin`: half the width of the window around an answer's expected time in which
  // the caller polls (zero: it sleeps until the answer).
  // `shared_memory`: whether to ask for the connection's memory (off: frames on the socket).
  explicit StepSocketClient(std::string path, absl::Duration spin_margin = absl::ZeroDuration(),
                            bool shared_memory = true)
      : path_(std::move(path)),
        shared_memory_(shared_memory),
        verify_spin_(spin_margin),
        propose_spin_(spin_margin),
        other_spin_(absl::ZeroDuration()) {}
  // A client of a TCP step endpoint; `name` (the worker's gRPC address) is for messages. Frames
  // stay on the socket (no shared memory across machines).
  StepSocketClient(TcpStepEndpointLookup lookup, std::string name, absl::Duration spin_margin = absl::ZeroDuration())
      : path_(std::move(name)),
        shared_memory_(false),
        tcp_lookup_(std::move(lookup)),
        verify_spin_(spin_margin),
        propose_spin_(spin_margin),
        other_spin_(absl::ZeroDuration()) {}
  ~StepSocketClient();
  StepSocketClient(const StepSocketClient&) = delete;
  StepSocketClient& operator=(const StepSocketClient&) = delete;

  // One call: the serialised response, or the worker's error for it. `*sent` (when given) says
  // whether the request reached the socket: false when no connection could be made (none is
  // tried for a second after a failed one), so the caller may send the call another way.
  // Errors of the socket itself: UNAVAILABLE when the connection broke after the request was
  // sent, DEADLINE_EXCEEDED after `timeout`; the connection is then closed, so a late answer
  // is never read as the next call's.
  // `after_send` (when given) runs on the calling thread once the request is written, before
  // the answer is awaited: the caller's own work overlaps the worker's, with no other thread.
  // It does not run when the request was not written, and must not call this client.
  absl::StatusOr<std::string> Call(StepMethod method, const std::string& request, absl::Duration timeout,
                                   bool* sent = nullptr, const std::function<void()>& after_send = nullptr,
                                   AnswerWait wait = AnswerWait::kPollWhenDue);

  // Called with how each answer through shared memory was waited for (frame_pickup.h), on the
  // calling thread. Call before the calls start.
  void set_pickup_observer(PickupObserver observer) { on_pickup_ = std::move(observer); }

  // The Unix socket's path, or the name of a TCP client.
  const std::string& path() const { return path_; }
  bool OverTcp() const { return tcp_lookup_ != nullptr; }
  // Whether a connection is open (the next call is likely to go over it).
  bool Connected() const { return connected_.load(std::memory_order_relaxed); }
  // Whether the current connection's frames go through shared memory (for tests).
  bool UsesSharedMemory() {
    std::lock_guard<std::mutex> lock(mu_);
    return memory_ != nullptr;
  }

 private:
  // Connects, then asks for the connection's memory (when shared_memory_).
  absl::Status ConnectLocked(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int> ConnectUnix() const;
  // Sets next_connect_ itself when the worker serves no TCP step endpoint or another worker
  // answered there.
  absl::StatusOr<int> ConnectTcpLocked(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  AnswerSpin& SpinFor(StepMethod method) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const bool shared_memory_;
  const TcpStepEndpointLookup tcp_lookup_;  // set: a TCP client
  PickupObserver on_pickup_;
  std::mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;
  std::atomic<bool> connected_{false};  // fd_ >= 0, readable without mu_
  std::unique_ptr<StepMemory> memory_ ABSL_GUARDED_BY(mu_);  // null: frames on the socket
  absl::Time next_connect_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Verify and Propose take different times: each learns its own.
  AnswerSpin verify_spin_ ABSL_GUARDED_BY(mu_);
  AnswerSpin propose_spin_ ABSL_GUARDED_BY(mu_);
  // The rest (Release) never polls: a release follows a verify answer at once, when the router
  // often runs on the worker's core (a Unix-socket wake puts the reader on the writer's CPU),
  // and polling there kept the worker from answering (a verifier's release took 389 us p50 on
  // the 2-core VM polling, 174 us sleeping until the answer).
  AnswerSpin other_spin_ ABSL_GUARDED_BY(mu_);
};

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_STEP_SOCKET_CLIENT_H_
