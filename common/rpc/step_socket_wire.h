// The step socket: a worker's per-step calls (Verify, Propose) over a Unix domain socket beside
// its gRPC address, for a router on the same host, or over a TCP port beside a TCP address
// (step_tcp.h).
//
// Why: on a virtual machine every hand-off between threads costs a wake-up, and a gRPC unary
// call crosses several (the poller that reads the request, the handler, the thread that writes
// the answer, the client's poller); after a worker's forward those threads have slept for
// milliseconds and wake slowly. A step socket is one blocking read and one blocking write on
// each side: the connection's own thread reads a request, runs the handler and writes the
// answer, and the caller's thread reads it. bench/rpc/rpc_roundtrip_bench measures both.
//
// Wire format: frames of a 12-byte header {u32 magic, u32 word, u32 payload bytes} (little-endian,
// as every build lays them out: step_tcp.cc holds builds to it) and the payload. A request's word is its StepMethod and its
// payload the request (a serialised protobuf message, or the compact encoding of step_codec.h);
// an answer's word is an absl::StatusCode, with the response in the request's encoding when OK
// and the error message otherwise. One call at a time per connection, answered in order.
//
// Security: the socket file is created with mode 0600 (the worker's user only); a TCP step port
// is as open as a plaintext gRPC port. Neither carries TLS, so a worker serves one only without
// TLS, and a router uses one only without worker TLS, for a worker it addresses itself.
#ifndef SPLITSPEC_COMMON_RPC_STEP_SOCKET_WIRE_H_
#define SPLITSPEC_COMMON_RPC_STEP_SOCKET_WIRE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace splitspec::rpc {

enum class StepMethod : uint32_t {
  kVerify = 1,   // splitspec.v1.VerifyRequest -> VerifyResponse
  kPropose = 2,  // splitspec.v1.ProposeRequest -> ProposeResponse
  // The same calls without protobuf: the core's items and answer encoded as step_codec.h
  // says. A worker that predates them answers UNIMPLEMENTED, and the client then sends the
  // protobuf method.
  kVerifyCompact = 3,
  kProposeCompact = 4,
  // Not a call: asks the worker for the connection's shared memory (step_memory.h); every
  // frame after its answer goes through that memory. A worker that predates it answers
  // UNIMPLEMENTED and the connection stays on the socket.
  kOpenMemory = 5,
  // splitspec.v1.ReleaseRequest -> ReleaseResponse: a finished request's sessions, released on
  // the step connection rather than over gRPC (one gRPC call cost ~0.6 ms of the router's time
  // between steps on a 2-core VM). A worker that predates it answers UNIMPLEMENTED, and the
  // client then releases over gRPC.
  kRelease = 6,
  // Not a call: asks which worker answers. The answer is the server's token (8 bytes,
  // little-endian), which the worker also reports in GetInfo (WorkerInfo.step_token): a router
  // that reached a TCP step port through an address that balances connections (a Service's
  // virtual IP) learns that it reached another worker than its gRPC channel did.
  kIdentify = 7,
};

inline constexpr uint32_t kStepFrameMagic = 0x314b5353;  // "SSK1"
// The largest payload either side accepts (as the gRPC servers' message limit).
inline constexpr uint32_t kMaxStepPayloadBytes = 64u << 20;

// A kIdentify answer's payload for `token`, and the token back (nullopt for anything else).
std::string EncodeStepToken(uint64_t token);
std::optional<uint64_t> DecodeStepToken(absl::string_view payload);

// "unix:///run/w.sock" or "unix:w.sock" -> "/run/w.sock.step" / "w.sock.step"; "" for an
// address that is not a Unix socket.
std::string StepSocketPath(const std::string& address);

// Writes one whole frame (EINTR and short writes handled). UNAVAILABLE when the peer is gone.
absl::Status WriteStepFrame(int fd, uint32_t word, absl::string_view payload);
// Where a reader polls the socket without sleeping: from `from` until `until` (by default
// never). On a virtual machine a thread that sleeps through a worker's forward takes of the
// order of 100 us to wake when the answer comes (its virtual CPU halted); one that polls at
// that moment reads the answer within a few microseconds. Spinning costs a CPU, so it is kept
// to a short window around when the frame is expected. A window may have a second stretch
// after the first (`later_from` to `later_until`): a worker whose next request comes either at
// once or after a long gap polls right after its answer and again around the long gap.
struct SpinWindow {
  absl::Time from = absl::InfiniteFuture();
  absl::Time until = absl::InfinitePast();
  absl::Time later_from = absl::InfiniteFuture();
  absl::Time later_until = absl::InfinitePast();

  bool Contains(absl::Time t) const { return (t >= from && t < until) || (t >= later_from && t < later_until); }
  // When the next stretch after `t` starts; absl::InfiniteFuture() when none does.
  absl::Time NextStart(absl::Time t) const {
    if (t < from) return from;
    if (t < later_from) return later_from;
    return absl::InfiniteFuture();
  }
  // Every stretch ended before `t` (false for a window with none).
  bool Closed(absl::Time t) const {
    return from != absl::InfiniteFuture() && t >= until && (later_from == absl::InfiniteFuture() || t >= later_until);
  }
};

// Reads one whole frame, waiting until `deadline` (absl::InfiniteFuture(): no limit).
// DEADLINE_EXCEEDED when it passes, UNAVAILABLE when the peer closed or reset the connection,
// INVALID_ARGUMENT for a header that is not ours or a payload over kMaxStepPayloadBytes (the
// connection cannot be resynchronised after either: callers close it).
// Waits without sleeping inside `spin` (for the header; the payload follows it at once).
absl::Status ReadStepFrame(int fd, absl::Time deadline, uint32_t* word, std::string* payload,
                           const SpinWindow& spin = SpinWindow{});

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_STEP_SOCKET_WIRE_H_
