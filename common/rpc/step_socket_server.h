// A worker's step socket server (wire format and rationale: step_socket_wire.h): listens on a
// Unix domain socket or a TCP port (step_tcp.h), gives each connection a thread of its own that reads a request, runs the
// handler on it and writes the answer, and so serves one caller per connection with no
// hand-off between threads. After an answer the thread polls for the next request for a short
// while when requests have been following answers quickly (spin_window.h, RequestSpin).
// A client on the Unix socket may ask for the connection's frames to go through shared memory
// (step_memory.h); over TCP they stay on the socket.
//
// Thread-safety: the handler runs on several connection threads at once when several clients
// are connected (a router and its replicas' helpers); the services' handlers lock as their
// gRPC methods do. Stop may be called from any thread, once or more.
#ifndef SPLITSPEC_COMMON_RPC_STEP_SOCKET_SERVER_H_
#define SPLITSPEC_COMMON_RPC_STEP_SOCKET_SERVER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/frame_pickup.h"
#include "common/rpc/step_memory.h"
#include "common/rpc/step_socket_wire.h"

namespace splitspec::rpc {

// Serialised request in, serialised response out; a non-OK status is sent back as the call's
// error (the connection stays open). UNIMPLEMENTED for a method the worker does not serve.
// `after_sent` (never null, empty on entry) may be set to work the server runs once the answer
// is written (metrics, gauges), so that the caller does not wait for it.
using StepHandler = std::function<absl::StatusOr<std::string>(StepMethod method, const std::string& request,
                                                              std::function<void()>* after_sent)>;

class StepSocketServer {
 public:
  // Binds `path` (a stale socket file from an earlier run is replaced; any other existing file
  // is an error), makes it owner-only (0600) and starts accepting. At most `max_connections`
  // are served at once; more are closed at once (their callers fall back to gRPC).
  // `spin_margin`: how long a connection thread polls for the next request after answering
  // (zero: it sleeps at once). `on_pickup` (when set): how each request through shared memory
  // was waited for (frame_pickup.h), on its connection's thread once the answer is sent.
  static absl::StatusOr<std::unique_ptr<StepSocketServer>> Start(const std::string& path, StepHandler handler,
                                                                  int max_connections = 16,
                                                                  absl::Duration spin_margin = absl::ZeroDuration(),
                                                                  PickupObserver on_pickup = nullptr);
  // The same on a TCP port of `host` (0: a free one; port() says which) instead of a Unix
  // socket. Anyone who can reach the port can call the worker: plaintext, like a worker's gRPC
  // port without TLS.
  static absl::StatusOr<std::unique_ptr<StepSocketServer>> StartTcp(const std::string& host, int port,
                                                                     StepHandler handler, int max_connections = 16,
                                                                     absl::Duration spin_margin = absl::ZeroDuration(),
                                                                     PickupObserver on_pickup = nullptr);
  ~StepSocketServer();
  StepSocketServer(const StepSocketServer&) = delete;
  StepSocketServer& operator=(const StepSocketServer&) = delete;

  // Stops accepting, closes every connection (a call in progress is answered first), waits for
  // the connection threads and removes the socket file.
  void Stop();
  // The Unix socket's path ("" on TCP) and the TCP port (0 on a Unix socket).
  const std::string& path() const { return path_; }
  int port() const { return port_; }
  // A random number drawn at start that kIdentify answers with (step_socket_wire.h).
  uint64_t token() const { return token_; }

 private:
  StepSocketServer(std::string path, int port, int listen_fd, int wake_read, int wake_write, StepHandler handler,
                   int max_connections, absl::Duration spin_margin, PickupObserver on_pickup);
  // Takes over a listening descriptor (closed on failure) and starts accepting on it.
  static absl::StatusOr<std::unique_ptr<StepSocketServer>> Launch(std::string path, int port, int listen_fd,
                                                                   StepHandler handler, int max_connections,
                                                                   absl::Duration spin_margin,
                                                                   PickupObserver on_pickup);
  void AcceptLoop();
  void Serve(int fd);
  // Answers a kOpenMemory request: new memory for the connection, passed to the client and kept
  // in `*memory`, or the reason there is none. False when the connection broke.
  bool OpenMemory(int fd, std::unique_ptr<StepMemory>* memory);

  const std::string path_;
  const int port_;
  const uint64_t token_;
  const int listen_fd_;
  // A pipe that wakes the accept loop's poll when Stop is called.
  const int wake_read_;
  const int wake_write_;
  const StepHandler handler_;
  const int max_connections_;
  const absl::Duration spin_margin_;
  const PickupObserver on_pickup_;
  std::thread accept_thread_;
  std::mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Open connections, each served by a detached thread that removes its descriptor when it
  // ends (so threads do not pile up as clients come and go); Stop waits for the list to empty.
  std::vector<int> connections_ ABSL_GUARDED_BY(mu_);
  std::condition_variable connections_closed_;
};

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_STEP_SOCKET_SERVER_H_
