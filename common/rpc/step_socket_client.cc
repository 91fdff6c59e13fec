// Step socket client (see step_socket_client.h).
#include "common/rpc/step_socket_client.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/rpc/step_tcp.h"

namespace splitspec::rpc {

StepSocketClient::~StepSocketClient() {
  std::lock_guard<std::mutex> lock(mu_);
  CloseLocked();
}

absl::StatusOr<int> StepSocketClient::ConnectUnix() const {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.empty() || path_.size() >= sizeof(addr.sun_path)) {
    return absl::UnavailableError(absl::StrCat("step socket path \"", path_, "\" is too long or empty"));
  }
  std::memcpy(addr.sun_path, path_.data(), path_.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("step socket: ", std::strerror(errno)));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to step socket ", path_, ": ", why));
  }
  return fd;
}

absl::StatusOr<int> StepSocketClient::ConnectTcpLocked(absl::Time deadline) {
  absl::StatusOr<TcpStepEndpoint> endpoint = tcp_lookup_();
  if (!endpoint.ok()) {
    if (absl::IsNotFound(endpoint.status())) next_connect_ = absl::Now() + kNoStepEndpointRetry;
    return absl::UnavailableError(absl::StrCat("no step socket for ", path_, ": ", endpoint.status().message()));
  }
  const absl::Time connect_deadline = std::min(deadline, absl::Now() + kTcpConnectTimeout);
  absl::StatusOr<int> fd = ConnectTcp(endpoint->host, endpoint->port, connect_deadline);
  if (!fd.ok()) return absl::UnavailableError(absl::StrCat("step socket of ", path_, ": ", fd.status().message()));
  // The worker behind the port must be the one GetInfo spoke for.
  uint32_t code = 0;
  std::string payload;
  absl::Status identified = WriteStepFrame(*fd, static_cast<uint32_t>(StepMethod::kIdentify), "");
  if (identified.ok()) identified = ReadStepFrame(*fd, connect_deadline, &code, &payload);
  if (identified.ok() && (code != static_cast<uint32_t>(absl::StatusCode::kOk) ||
                          DecodeStepToken(payload) != std::optional<uint64_t>(endpoint->token))) {
    next_connect_ = absl::Now() + kNoStepEndpointRetry;
    identified = absl::FailedPreconditionError("another worker answers there");
  }
  if (!identified.ok()) {
    close(*fd);
    return absl::UnavailableError(absl::StrCat("step socket of ", path_, " at ", endpoint->host, ":", endpoint->port,
                                               ": ", identified.message()));
  }
  return fd;
}

absl::Status StepSocketClient::ConnectLocked(absl::Time deadline) {
  absl::StatusOr<int> fd = OverTcp() ? ConnectTcpLocked(deadline) : ConnectUnix();
  if (!fd.ok()) return fd.status();
  fd_ = *fd;
  connected_.store(true, std::memory_order_relaxed);
  if (!shared_memory_) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<StepMemory>> memory = OpenStepMemory(fd_, deadline);
  if (!memory.ok()) {
    CloseLocked();
    return absl::UnavailableError(absl::StrCat("step socket ", path_, ": ", memory.status().message()));
  }
  memory_ = *std::move(memory);  // null when the worker has none: frames on the socket
  return absl::OkStatus();
}

void StepSocketClient::CloseLocked() {
  memory_.reset();
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  connected_.store(false, std::memory_order_relaxed);
}

AnswerSpin& StepSocketClient::SpinFor(StepMethod method) {
  switch (method) {
    case StepMethod::kVerify:
    case StepMethod::kVerifyCompact: return verify_spin_;
    case StepMethod::kPropose:
    case StepMethod::kProposeCompact: return propose_spin_;
    default: return other_spin_;
  }
}

absl::StatusOr<std::string> StepSocketClient::Call(StepMethod method, const std::string& request,
                                                   absl::Duration timeout, bool* sent,
                                                   const std::function<void()>& after_send, AnswerWait wait) {
  if (sent != nullptr) *sent = false;
  if (request.size() > kMaxStepPayloadBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("step socket request of ", request.size(), " bytes exceeds ", kMaxStepPayloadBytes));
  }
  const absl::Time deadline = absl::Now() + timeout;
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ < 0) {
    if (absl::Now() < next_connect_) return absl::UnavailableError(absl::StrCat("no step socket at ", path_));
    const absl::Time asked = absl::Now();
    if (absl::Status s = ConnectLocked(deadline); !s.ok()) {
      next_connect_ = std::max(next_connect_, asked + absl::Seconds(1));
      return s;
    }
  }
  if (sent != nullptr) *sent = true;
  if (absl::Status s = WriteConnectionFrame(memory_.get(), StepMemory::Side::kClient, fd_,
                                            static_cast<uint32_t>(method), request);
      !s.ok()) {
    CloseLocked();
    return s;
  }
  const absl::Time written = absl::Now();
  if (after_send) after_send();
  AnswerSpin& spin = SpinFor(method);
  uint32_t code = 0;
  std::string payload;
  const bool poll = wait == AnswerWait::kPollWhenDue;
  const SpinWindow window = poll ? spin.Window(written) : SpinWindow{};
  std::optional<FramePickup> pickup;
  const absl::Status read =
      ReadConnectionFrame(memory_.get(), StepMemory::Side::kClient, fd_, deadline, &code, &payload, window, &pickup);
  // A call that slept is answered later than its worker could: its round trip would misplace
  // the window of the calls that poll.
  if (read.ok() && poll) spin.Observe(absl::Now() - written);
  if (read.ok() && on_pickup_ && pickup.has_value()) on_pickup_(method, *pickup);
  if (absl::Status s = read; !s.ok()) {
    CloseLocked();
    if (absl::IsInvalidArgument(s)) return absl::UnavailableError(absl::StrCat("step socket ", path_, ": ", s.message()));
    return s;
  }
  if (code == static_cast<uint32_t>(absl::StatusCode::kOk)) return payload;
  if (code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::UnknownError(absl::StrCat("step socket answer with status code ", code, ": ", payload));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), payload);
}

}  // namespace splitspec::rpc
