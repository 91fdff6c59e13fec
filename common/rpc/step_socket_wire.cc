// Step socket frames (see step_socket_wire.h).
#include "common/rpc/step_socket_wire.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace splitspec::rpc {
namespace {

constexpr size_t kHeaderBytes = 12;

// Writes `parts` whole, as one sendmsg when the socket takes it all (the usual case): the
// reader then wakes once for a whole frame instead of once for its header and again for its
// payload.
absl::Status WriteAll(int fd, iovec* parts, int count) {
  while (count > 0) {
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = static_cast<size_t>(count);
    // MSG_NOSIGNAL: a closed peer is an error to report, not a SIGPIPE that ends the process.
    const ssize_t n = sendmsg(fd, &message, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError(absl::StrCat("step socket write: ", std::strerror(errno)));
    size_t done = static_cast<size_t>(n);
    while (count > 0 && done >= parts->iov_len) {
      done -= parts->iov_len;
      ++parts;
      --count;
    }
    if (count > 0) {
      parts->iov_base = static_cast<char*>(parts->iov_base) + done;
      parts->iov_len -= done;
    }
  }
  return absl::OkStatus();
}

// Waits for the descriptor to be readable until `deadline` (absl::InfiniteFuture(): for ever),
// polling without sleeping while the clock is inside `spin`.
absl::Status WaitReadable(int fd, absl::Time deadline, const SpinWindow& spin) {
  for (;;) {
    const absl::Time now = absl::Now();
    if (now >= deadline) return absl::DeadlineExceededError("step socket call timed out");
    pollfd p{fd, POLLIN, 0};
    if (spin.Contains(now)) {
      const int ready = poll(&p, 1, 0);
      if (ready > 0) return absl::OkStatus();
      if (ready < 0 && errno != EINTR) return absl::UnavailableError(absl::StrCat("step socket poll: ", std::strerror(errno)));
      // A thread that wants this CPU (a worker computing, the peer about to send the frame
      // polled for) runs first; with none waiting the poll goes on at once.
      sched_yield();
      continue;
    }
    // Sleeps until the answer, the deadline or the start of the next stretch of the spin window,
    // whichever is first.
    const absl::Time wake = std::min(deadline, spin.NextStart(now));
    timespec timeout{};
    const timespec* timeout_or_none = nullptr;
    if (wake != absl::InfiniteFuture()) {
      timeout = absl::ToTimespec(wake - now);
      timeout_or_none = &timeout;
    }
    const int ready = ppoll(&p, 1, timeout_or_none, nullptr);
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) return absl::UnavailableError(absl::StrCat("step socket poll: ", std::strerror(errno)));
  }
}

// Reads `size` bytes, trying the read before waiting: a frame's payload (and often its header)
// is there already, and needs no poll.
absl::Status ReadAll(int fd, absl::Time deadline, const SpinWindow& spin, char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = recv(fd, data, size, MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return absl::UnavailableError("step socket closed by the peer");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("step socket read: ", std::strerror(errno)));
    }
    if (absl::Status s = WaitReadable(fd, deadline, spin); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeStepToken(uint64_t token) {
  std::string bytes(sizeof(token), '\0');
  std::memcpy(bytes.data(), &token, sizeof(token));  // little-endian: step_tcp.cc holds builds to it
  return bytes;
}

std::optional<uint64_t> DecodeStepToken(absl::string_view payload) {
  if (payload.size() != sizeof(uint64_t)) return std::nullopt;
  uint64_t token = 0;
  std::memcpy(&token, payload.data(), sizeof(token));
  return token;
}

std::string StepSocketPath(const std::string& address) {
  if (address.rfind("unix:", 0) != 0) return "";
  std::string path = address.substr(5);
  // unix:///abs/path -> /abs/path; unix:rel/path stays relative.
  if (path.rfind("//", 0) == 0) path = path.substr(2);
  if (path.empty()) return "";
  return path + ".step";
}

absl::Status WriteStepFrame(int fd, uint32_t word, absl::string_view payload) {
  if (payload.size() > kMaxStepPayloadBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("step socket message of ", payload.size(), " bytes exceeds ", kMaxStepPayloadBytes));
  }
  char header[kHeaderBytes];
  const uint32_t fields[3] = {kStepFrameMagic, word, static_cast<uint32_t>(payload.size())};
  std::memcpy(header, fields, sizeof(fields));
  iovec parts[2] = {{header, sizeof(header)}, {const_cast<char*>(payload.data()), payload.size()}};
  return WriteAll(fd, parts, 2);
}

absl::Status ReadStepFrame(int fd, absl::Time deadline, uint32_t* word, std::string* payload,
                           const SpinWindow& spin) {
  char header[kHeaderBytes];
  if (absl::Status s = ReadAll(fd, deadline, spin, header, sizeof(header)); !s.ok()) return s;
  uint32_t fields[3];
  std::memcpy(fields, header, sizeof(fields));
  if (fields[0] != kStepFrameMagic) return absl::InvalidArgumentError("step socket: not a step frame");
  if (fields[2] > kMaxStepPayloadBytes) {
    return absl::InvalidArgumentError(absl::StrCat("step socket: payload of ", fields[2], " bytes exceeds ",
                                                   kMaxStepPayloadBytes));
  }
  *word = fields[1];
  payload->resize(fields[2]);
  return ReadAll(fd, deadline, SpinWindow{}, payload->data(), payload->size());
}

}  // namespace splitspec::rpc
