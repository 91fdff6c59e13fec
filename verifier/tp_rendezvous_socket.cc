// TCP helpers of the rendezvous (see tp_rendezvous_socket.h).
#include "verifier/tp_rendezvous_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace splitspec::verifier::rendezvous {
namespace {

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

std::string ErrnoText(int err) { return std::strerror(err); }

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head != nullptr) freeaddrinfo(head);
  }
};

absl::Status Resolve(const std::string& host, int port, bool passive, AddrInfoList* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  const std::string service = std::to_string(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out->head);
  if (rc != 0)
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(rc)));
  return absl::OkStatus();
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Waker::Waker() {
  int fds[2] = {-1, -1};
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0) {
    read_ = Socket(fds[0]);
    write_ = Socket(fds[1]);
  }
}

void Waker::Wake() {
  const char byte = 1;
  // A full pipe already wakes the reader.
  [[maybe_unused]] const ssize_t n = ::write(write_.fd(), &byte, 1);
}

void Waker::Drain() {
  char buffer[64];
  while (::read(read_.fd(), buffer, sizeof(buffer)) > 0) {
  }
}

absl::StatusOr<Socket> Listen(const std::string& host, int port) {
  AddrInfoList addresses;
  if (absl::Status s = Resolve(host, port, /*passive=*/true, &addresses); !s.ok()) return s;
  std::string last_error = "no address";
  for (addrinfo* a = addresses.head; a != nullptr; a = a->ai_next) {
    Socket socket(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!socket.valid()) {
      last_error = ErrnoText(errno);
      continue;
    }
    const int one = 1;
    setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(socket.fd(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(socket.fd(), 64) != 0) {
      last_error = ErrnoText(errno);
      continue;
    }
    SetNonBlocking(socket.fd());
    return socket;
  }
  return absl::UnavailableError(
      absl::StrCat("cannot listen on ", host, ":", port, ": ", last_error));
}

int LocalPort(const Socket& socket) {
  sockaddr_storage address{};
  socklen_t size = sizeof(address);
  if (getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address), &size) != 0) return -1;
  if (address.ss_family == AF_INET)
    return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  if (address.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  return -1;
}

Socket AcceptOne(const Socket& listener) {
  const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return Socket();
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return Socket(fd);
}

absl::StatusOr<Socket> Connect(const std::string& host, int port, Clock::time_point deadline) {
  AddrInfoList addresses;
  if (absl::Status s = Resolve(host, port, /*passive=*/false, &addresses); !s.ok()) return s;
  std::string last_error = "no address";
  for (addrinfo* a = addresses.head; a != nullptr; a = a->ai_next) {
    Socket socket(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!socket.valid()) {
      last_error = ErrnoText(errno);
      continue;
    }
    if (::connect(socket.fd(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_error = ErrnoText(errno);
        continue;
      }
      if (!WaitReady(socket.fd(), POLLOUT, deadline)) {
        last_error = "connect timed out";
        continue;
      }
      int error = 0;
      socklen_t size = sizeof(error);
      getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error, &size);
      if (error != 0) {
        last_error = ErrnoText(error);
        continue;
      }
    }
    const int one = 1;
    setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return socket;
  }
  return absl::UnavailableError(
      absl::StrCat("cannot connect to ", host, ":", port, ": ", last_error));
}

absl::Status SendFrame(const Socket& socket, const Frame& frame,
                       std::chrono::milliseconds timeout) {
  const std::string bytes = EncodeFrame(frame);
  const Clock::time_point deadline = Clock::now() + timeout;
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(socket.fd(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
        WaitReady(socket.fd(), POLLOUT, deadline)) {
      if (Clock::now() < deadline) continue;
    }
    return absl::UnavailableError(
        absl::StrCat("cannot send to the peer: ", n < 0 ? ErrnoText(errno) : "timed out"));
  }
  return absl::OkStatus();
}

absl::Status ReceiveInto(const Socket& socket, FrameReader* reader) {
  char buffer[4096];
  for (size_t total = 0; total < 64 * 1024;) {
    const ssize_t n = ::recv(socket.fd(), buffer, sizeof(buffer), 0);
    if (n > 0) {
      reader->Feed(absl::string_view(buffer, static_cast<size_t>(n)));
      total += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return absl::UnavailableError("the peer closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return absl::UnavailableError(absl::StrCat("the connection failed: ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

bool WaitReady(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true;  // let the caller's next call report the error
  }
}

int PollTimeoutMs(Clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  // Round up, so a deadline in 0.4 ms is not polled with 0 in a busy loop.
  return static_cast<int>(std::clamp<int64_t>(ms + 1, 0, INT_MAX));
}

}  // namespace splitspec::verifier::rendezvous
