// Step sockets over TCP (see step_tcp.h).
#include "common/rpc/step_tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace splitspec::rpc {
namespace {

// Frames carry their header words as the host lays them out (step_socket_wire.cc), and the
// compact encoding its numbers (step_codec.cc): both ends of a TCP connection may be different
// machines, so every build is held to one byte order.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "step frames are little-endian on the wire");

using AddressList = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;

absl::StatusOr<AddressList> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int error = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
      error != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(error)));
  }
  return AddressList(found, &freeaddrinfo);
}

// Waits for a non-blocking connect on `fd` to finish; OK once connected.
absl::Status FinishConnect(int fd, absl::Time deadline) {
  for (;;) {
    const int64_t wait_ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    pollfd pfd{fd, POLLOUT, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(wait_ms, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return absl::UnavailableError(std::strerror(errno));
    if (ready == 0) return absl::DeadlineExceededError("not connected in time");
    int error = 0;
    socklen_t length = sizeof(error);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
    if (error != 0) return absl::UnavailableError(std::strerror(error));
    return absl::OkStatus();
  }
}

}  // namespace

absl::StatusOr<int> ListenTcp(const std::string& host, int port, int* bound_port) {
  absl::StatusOr<AddressList> addresses = Resolve(host, port, /*passive=*/true);
  if (!addresses.ok()) return addresses.status();
  std::string why = "no address";
  for (const addrinfo* a = addresses->get(); a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    // A restarted worker rebinds its port at once, past the old connections' TIME_WAIT.
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    sockaddr_storage bound{};
    socklen_t length = sizeof(bound);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
      why = std::strerror(errno);
      close(fd);
      continue;
    }
    *bound_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port)
                                              : ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
    return fd;
  }
  return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port, ": ", why));
}

absl::StatusOr<int> ConnectTcp(const std::string& host, int port, absl::Time deadline) {
  absl::StatusOr<AddressList> addresses = Resolve(host, port, /*passive=*/false);
  if (!addresses.ok()) return addresses.status();
  std::string why = "no address";
  for (const addrinfo* a = addresses->get(); a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    absl::Status connected = absl::OkStatus();
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      connected = errno == EINPROGRESS ? FinishConnect(fd, deadline) : absl::UnavailableError(std::strerror(errno));
    }
    // The frame code waits with poll and reads what is there: it wants a blocking descriptor.
    if (connected.ok() && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
      connected = absl::UnavailableError(std::strerror(errno));
    }
    if (!connected.ok()) {
      why = std::string(connected.message());
      close(fd);
      continue;
    }
    SetTcpNoDelay(fd);
    return fd;
  }
  return absl::UnavailableError(absl::StrCat("cannot connect to ", host, ":", port, ": ", why));
}

void SetTcpNoDelay(int fd) {
  const int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

}  // namespace splitspec::rpc
