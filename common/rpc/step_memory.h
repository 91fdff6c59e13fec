// A step socket connection's frames through shared memory instead of the socket (opt-in by the
// client: StepMethod::kOpenMemory).
//
// Why: a frame written to a Unix socket costs its writer a sendmsg (17-28 us measured on the
// 2-core VM of docs/benchmarks.md after a forward has flushed the caches) and its reader a poll
// and two recvs (8-9 us), four times a speculative step. When the reader is polling for the
// frame anyway (spin_window.h), a frame can be handed over with a memcpy and one atomic store,
// no system call on either side.
//
// Layout: the worker creates the memory (memfd) when the router asks for it on a fresh
// connection and passes its descriptor back with the answer (SCM_RIGHTS). It holds two
// mailboxes, one a direction: the request (router -> worker) and the answer (worker -> router),
// each a header {published, reader_asleep, word, bytes, published_at} and room for
// kMaxStepPayloadBytes (the
// memory is sparse: pages are used as frames reach them). Calls alternate strictly on a
// connection, so a mailbox holds one frame at a time: its writer fills the payload, then
// publishes it by counting `published` up; its reader waits for the count to move.
// In bytes (host order, both ends on one host): {u32 magic "SSKM", u32 version 1, u64 payload
// room} at 0, the request's header at 64 and the answer's at 128 (four u32 in the order above,
// then an i64: the steady clock's nanoseconds when the frame was published, 0 from a writer
// that predates it), the request's payload at 4096 and the answer's at 4096 + the payload room.
//
// The socket stays the connection: a reader that sleeps says so in `reader_asleep` and waits in
// the kernel on the socket, and the writer that sees the flag after publishing rings it with one
// byte (the doorbell); both sides use sequentially consistent order on the flag and the count,
// so either the reader sees the frame before it sleeps or the writer sees the reader asleep.
// The socket's end (a peer that exits or is stopped) wakes a sleeping reader as before, and a
// deadline bounds every wait.
//
// Thread-safety: one thread at a time a side (the step socket client's lock, the server's
// connection thread). A peer can write anything into the memory: sizes are checked before use.
#ifndef SPLITSPEC_COMMON_RPC_STEP_MEMORY_H_
#define SPLITSPEC_COMMON_RPC_STEP_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/rpc/frame_pickup.h"
#include "common/rpc/step_socket_wire.h"

namespace splitspec::rpc {

class StepMemory {
 public:
  // Which end of the connection this is: the client writes requests and reads answers.
  enum class Side { kClient, kServer };

  // The worker's side: new memory (a memfd) for one connection.
  static absl::StatusOr<std::unique_ptr<StepMemory>> Create();
  // The router's side: maps the memory behind `fd` (taken over: closed with the StepMemory, or
  // at once on an error). INVALID_ARGUMENT for memory that is not a step memory's.
  static absl::StatusOr<std::unique_ptr<StepMemory>> Map(int fd);
  ~StepMemory();
  StepMemory(const StepMemory&) = delete;
  StepMemory& operator=(const StepMemory&) = delete;

  // The descriptor to pass to the peer (the memory stays valid after the peer maps it).
  int fd() const { return fd_; }

  // Puts one frame in the mailbox `side` writes and rings `socket` when its reader sleeps.
  // RESOURCE_EXHAUSTED for a payload over kMaxStepPayloadBytes (nothing is published).
  absl::Status Write(Side side, int socket, uint32_t word, absl::string_view payload);
  // Takes the next frame from the mailbox `side` reads, waiting as ReadStepFrame does: polls the
  // mailbox without sleeping inside `spin`, sleeps on `socket` outside it, until `deadline`.
  // UNAVAILABLE when the socket closed with no frame waiting, DEADLINE_EXCEEDED when the
  // deadline passed, INVALID_ARGUMENT for a frame whose size is not possible.
  // `*pickup` (when given): how the frame was waited for (frame_pickup.h), or none when its
  // writer left no publishing time.
  absl::Status Read(Side side, int socket, absl::Time deadline, uint32_t* word, std::string* payload,
                    const SpinWindow& spin = SpinWindow{}, std::optional<FramePickup>* pickup = nullptr);

 private:
  struct Region;
  struct Mailbox;
  StepMemory(int fd, void* base, size_t size);
  Mailbox& Writes(Side side);
  Mailbox& Reads(Side side);
  char* PayloadOf(const Mailbox& mailbox);
  // Sleeps on `socket` until the mailbox's count moves past `seen`, it closes, or `wake`.
  absl::Status SleepUntilPublished(Mailbox& mailbox, uint32_t seen, int socket, absl::Time wake);
  // Reads what the socket holds (doorbells): UNAVAILABLE when it has ended with no frame past
  // `seen` published.
  absl::Status DrainSocket(Mailbox& mailbox, uint32_t seen, int socket);

  const int fd_;
  void* const base_;
  const size_t size_;
  // Frames this side has read from its mailbox (the count the writer has published up to).
  uint32_t read_ = 0;
  // Frames this side has written to its mailbox.
  uint32_t written_ = 0;
};

// One frame on a connection, through `memory` when it has some (not null), on the socket
// otherwise: what both ends of a step socket call, whichever way the connection went.
absl::Status WriteConnectionFrame(StepMemory* memory, StepMemory::Side side, int socket, uint32_t word,
                                  absl::string_view payload);
// `*pickup` as StepMemory::Read's; none for a frame on the socket.
absl::Status ReadConnectionFrame(StepMemory* memory, StepMemory::Side side, int socket, absl::Time deadline,
                                 uint32_t* word, std::string* payload, const SpinWindow& spin = SpinWindow{},
                                 std::optional<FramePickup>* pickup = nullptr);

// The worker's answer to kOpenMemory: an OK frame, then one byte that carries `memory`'s
// descriptor (SCM_RIGHTS; a byte of its own, so that reading the frame never reads past it).
absl::Status SendStepMemory(int socket, const StepMemory& memory);
// The router's request for a connection's memory, sent on a fresh connection before any call:
// the mapped memory; null when the worker refused (an error answer, such as UNIMPLEMENTED from
// a worker that predates it: the connection goes on with frames on the socket); an error when
// the socket failed (UNAVAILABLE, DEADLINE_EXCEEDED: close the connection).
absl::StatusOr<std::unique_ptr<StepMemory>> OpenStepMemory(int socket, absl::Time deadline);

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_STEP_MEMORY_H_
