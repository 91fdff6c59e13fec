// Step socket server (see step_socket_server.h).
#include "common/rpc/step_socket_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/spin_window.h"
#include "common/rpc/step_memory.h"
#include "common/rpc/step_tcp.h"

namespace splitspec::rpc {

absl::StatusOr<std::unique_ptr<StepSocketServer>> StepSocketServer::Start(const std::string& path, StepHandler handler,
                                                                          int max_connections,
                                                                          absl::Duration spin_margin,
                                                                          PickupObserver on_pickup) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("step socket path \"", path, "\" must be 1 to ", sizeof(addr.sun_path) - 1, " bytes"));
  }
  if (max_connections < 1) return absl::InvalidArgumentError("a step socket needs max_connections >= 1");
  std::memcpy(addr.sun_path, path.data(), path.size());
  struct stat existing;
  if (lstat(path.c_str(), &existing) == 0) {
    // A socket left by a worker that did not stop cleanly is replaced; a regular file is not ours.
    if (!S_ISSOCK(existing.st_mode)) {
      return absl::AlreadyExistsError(absl::StrCat(path, " exists and is not a socket"));
    }
    unlink(path.c_str());
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("step socket: ", std::strerror(errno)));
  // Owner-only from the start (the umask applies to bind), then made explicit.
  const mode_t old_umask = umask(0177);
  const int bound = bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  umask(old_umask);
  if (bound != 0 || chmod(path.c_str(), 0600) != 0 || listen(fd, 16) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    if (bound == 0) unlink(path.c_str());  // ours, but never served: leave nothing behind
    return absl::UnavailableError(absl::StrCat("cannot listen on step socket ", path, ": ", why));
  }
  return Launch(path, /*port=*/0, fd, std::move(handler), max_connections, spin_margin, std::move(on_pickup));
}

absl::StatusOr<std::unique_ptr<StepSocketServer>> StepSocketServer::StartTcp(const std::string& host, int port,
                                                                             StepHandler handler, int max_connections,
                                                                             absl::Duration spin_margin,
                                                                             PickupObserver on_pickup) {
  if (max_connections < 1) return absl::InvalidArgumentError("a step socket needs max_connections >= 1");
  if (port < 0 || port > 65535) return absl::InvalidArgumentError(absl::StrCat("step port ", port, " is not 0..65535"));
  int bound_port = 0;
  absl::StatusOr<int> fd = ListenTcp(host, port, &bound_port);
  if (!fd.ok()) return absl::UnavailableError(absl::StrCat("step socket: ", fd.status().message()));
  return Launch("", bound_port, *fd, std::move(handler), max_connections, spin_margin, std::move(on_pickup));
}

absl::StatusOr<std::unique_ptr<StepSocketServer>> StepSocketServer::Launch(std::string path, int port, int listen_fd,
                                                                           StepHandler handler, int max_connections,
                                                                           absl::Duration spin_margin,
                                                                           PickupObserver on_pickup) {
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    const std::string why = std::strerror(errno);
    close(listen_fd);
    if (!path.empty()) unlink(path.c_str());
    return absl::InternalError(absl::StrCat("step socket: ", why));
  }
  std::unique_ptr<StepSocketServer> server(new StepSocketServer(std::move(path), port, listen_fd, wake[0], wake[1],
                                                                std::move(handler), max_connections, spin_margin,
                                                                std::move(on_pickup)));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

StepSocketServer::StepSocketServer(std::string path, int port, int listen_fd, int wake_read, int wake_write,
                                   StepHandler handler, int max_connections, absl::Duration spin_margin,
                                   PickupObserver on_pickup)
    : path_(std::move(path)),
      port_(port),
      token_(absl::Uniform<uint64_t>(absl::BitGen())),
      listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      handler_(std::move(handler)),
      max_connections_(max_connections),
      spin_margin_(spin_margin),
      on_pickup_(std::move(on_pickup)) {}

StepSocketServer::~StepSocketServer() {
  Stop();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
}

void StepSocketServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  const char byte = 0;
  while (write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  std::unique_lock<std::mutex> lock(mu_);
  // Ends each connection thread's next read (a call in progress still writes its answer); the
  // thread then closes its descriptor.
  for (int fd : connections_) shutdown(fd, SHUT_RD);
  connections_closed_.wait(lock, [this] { return connections_.empty(); });
  if (!path_.empty()) unlink(path_.c_str());
}

void StepSocketServer::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;  // Stop
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // the client gave up, or descriptors ran out: keep serving the others
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || static_cast<int>(connections_.size()) >= max_connections_) {
      close(fd);
      continue;
    }
    if (port_ != 0) SetTcpNoDelay(fd);
    connections_.push_back(fd);
    std::thread([this, fd] { Serve(fd); }).detach();
  }
}

void StepSocketServer::Serve(int fd) {
  uint32_t word = 0;
  std::string request;
  RequestSpin spin(spin_margin_);
  SpinWindow window;  // none before the first request
  absl::Time answered = absl::InfinitePast();
  // Set when the client asks for it: every frame after that goes through it.
  std::unique_ptr<StepMemory> memory;
  constexpr StepMemory::Side kSide = StepMemory::Side::kServer;
  std::optional<FramePickup> pickup;  // how the request in hand was waited for
  // Ends when the client disconnects, sends something that is not a frame, or Stop shuts the
  // descriptor down.
  while (ReadConnectionFrame(memory.get(), kSide, fd, absl::InfiniteFuture(), &word, &request, window, &pickup).ok()) {
    if (static_cast<StepMethod>(word) == StepMethod::kIdentify) {
      if (!WriteConnectionFrame(memory.get(), kSide, fd, static_cast<uint32_t>(absl::StatusCode::kOk),
                                EncodeStepToken(token_))
               .ok()) {
        break;
      }
      continue;
    }
    if (static_cast<StepMethod>(word) == StepMethod::kOpenMemory) {
      if (!OpenMemory(fd, &memory)) break;
      continue;
    }
    if (answered != absl::InfinitePast()) spin.Observe(absl::Now() - answered);
    std::function<void()> after_sent;
    const absl::StatusOr<std::string> answer = handler_(static_cast<StepMethod>(word), request, &after_sent);
    // An answer's word is its status code (OK: the response follows; otherwise the message).
    const absl::string_view payload = answer.ok() ? absl::string_view(*answer) : answer.status().message();
    const absl::Status sent = WriteConnectionFrame(memory.get(), kSide, fd,
                                                   static_cast<uint32_t>(answer.status().code()), payload);
    answered = absl::Now();
    if (after_sent) after_sent();
    // After the answer, as the handler's own bookkeeping: the router does not wait for it.
    if (on_pickup_ && pickup.has_value()) on_pickup_(static_cast<StepMethod>(word), *pickup);
    if (!sent.ok()) break;
    window = spin.Window(answered);
  }
  std::lock_guard<std::mutex> lock(mu_);
  connections_.erase(std::find(connections_.begin(), connections_.end(), fd));
  close(fd);
  if (connections_.empty()) connections_closed_.notify_all();
}

bool StepSocketServer::OpenMemory(int fd, std::unique_ptr<StepMemory>* memory) {
  if (port_ != 0) {
    // The memory is passed as a descriptor, which only a Unix socket carries; the client goes on
    // with frames on the socket.
    return WriteStepFrame(fd, static_cast<uint32_t>(absl::StatusCode::kFailedPrecondition),
                          "no shared memory over TCP")
        .ok();
  }
  if (*memory != nullptr) {
    return (*memory)
        ->Write(StepMemory::Side::kServer, fd, static_cast<uint32_t>(absl::StatusCode::kFailedPrecondition),
                "this connection's step memory is open already")
        .ok();
  }
  absl::StatusOr<std::unique_ptr<StepMemory>> created = StepMemory::Create();
  if (!created.ok()) {
    // Refused: the client goes on with frames on the socket.
    return WriteStepFrame(fd, static_cast<uint32_t>(created.status().code()), created.status().message()).ok();
  }
  if (!SendStepMemory(fd, **created).ok()) return false;
  *memory = *std::move(created);
  return true;
}

}  // namespace splitspec::rpc
