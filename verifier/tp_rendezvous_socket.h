// The few TCP operations the tensor-parallel rendezvous needs, on non-blocking sockets with
// deadlines (POSIX sockets; no gRPC). Internal to verifier/tp_rendezvous_*.cc.
#ifndef SPLITSPEC_VERIFIER_TP_RENDEZVOUS_SOCKET_H_
#define SPLITSPEC_VERIFIER_TP_RENDEZVOUS_SOCKET_H_

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "verifier/tp_rendezvous_wire.h"

namespace splitspec::verifier::rendezvous {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor; closes it on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { Close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Close();

 private:
  int fd_ = -1;
};

// A self-pipe that wakes a thread blocked in poll().
class Waker {
 public:
  Waker();
  int read_fd() const { return read_.fd(); }
  void Wake();
  void Drain();

 private:
  Socket read_, write_;
};

// A listening socket on host:port (port 0 = a free one), non-blocking.
absl::StatusOr<Socket> Listen(const std::string& host, int port);
int LocalPort(const Socket& socket);
// Accepts one pending connection, non-blocking; an invalid Socket when none is pending.
Socket AcceptOne(const Socket& listener);
// Connects to host:port, trying each address it resolves to, until `deadline`. UNAVAILABLE
// (with the reason) when no address accepted: the caller may retry.
absl::StatusOr<Socket> Connect(const std::string& host, int port, Clock::time_point deadline);
// Sends the whole frame within `timeout` (frames are small: only a peer that stopped reading
// fills the socket buffer). UNAVAILABLE on failure.
absl::Status SendFrame(const Socket& socket, const Frame& frame,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
// Reads what the socket holds now (at most 64 KiB per call) into `reader`. UNAVAILABLE when the
// peer closed or reset the connection.
absl::Status ReceiveInto(const Socket& socket, FrameReader* reader);
// poll() on one descriptor for `events` until `deadline`; true when ready (or in error).
bool WaitReady(int fd, short events, Clock::time_point deadline);
// Milliseconds from now until `t`, clamped to [0, INT_MAX] for poll().
int PollTimeoutMs(Clock::time_point t);

}  // namespace splitspec::verifier::rendezvous

#endif  // SPLITSPEC_VERIFIER_TP_RENDEZVOUS_SOCKET_H_
