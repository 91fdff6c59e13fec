// How the processes of a multi-process tensor-parallel verifier group find each other over the
// network: rank 0 (the leader) listens on a TCP port and hands the group id (NCCL's unique id,
// opaque bytes here) to each follower rank that connects; the connections then stay open, each
// side sending a heartbeat, so that a rank whose peer is gone finds out and can exit instead
// of waiting in a collective forever (a blocked NCCL call never returns on its own). The
// orchestrator (e.g. LeaderWorkerSet) then restarts the whole group.
//
// Why plain TCP and not a gRPC service: the exchange is one small message per follower at
// start-up, and loss of a peer is exactly what a TCP connection reports (end of stream or a
// reset), so a raw connection with a heartbeat is both the transport and the failure detector.
// A gRPC service would add a second server, its threads and a streaming call to learn the same
// thing, and would tie this core to gRPC. Frames: verifier/tp_rendezvous_wire.h.
//
// The protocol:
//   1. A follower connects (retrying with backoff until join_timeout: the leader's pod may
//      start later, its name may not resolve yet) and sends kHello {group size, rank}.
//   2. The leader checks the group size, that 1 <= rank < size, and that no follower holds
//      that rank; it answers kWelcome {size, rank, group id} or kRefuse {why} and closes.
//      A connection that sends anything else, or nothing within handshake_timeout, is closed;
//      it does not disturb the group.
//   3. Both sides send kHeartbeat every heartbeat_timeout / 3. A peer whose connection ends,
//      fails, carries bytes outside the protocol, or stays silent for heartbeat_timeout is
//      lost: `on_lost` is called once, on the rendezvous thread (the binary prints the reason
//      and exits; tests record it).
//   4. A rank that leaves in order (the group shut down) sends kBye first, and is not lost.
#ifndef SPLITSPEC_VERIFIER_TP_RENDEZVOUS_H_
#define SPLITSPEC_VERIFIER_TP_RENDEZVOUS_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "verifier/tp_rendezvous_socket.h"
#include "verifier/tp_rendezvous_wire.h"

namespace splitspec::verifier {

struct RendezvousOptions {
  int group_size = 2;
  // Leader: how long all followers may take to join. Follower: how long the leader may take to
  // answer (connection attempts included).
  absl::Duration join_timeout = absl::Seconds(300);
  // A peer silent this long is lost; heartbeats go out every third of it.
  absl::Duration heartbeat_timeout = absl::Seconds(15);
  // Leader: a connection that has not said kHello within this is closed.
  absl::Duration handshake_timeout = absl::Seconds(10);
};

// Called at most once, on the rendezvous thread, with why the peer is lost. It must not call
// back into the object that calls it.
using PeerLostCallback = std::function<void(const absl::Status&)>;

// "HOST:PORT" or "[V6]:PORT" -> {host, port}; INVALID_ARGUMENT otherwise.
absl::StatusOr<std::pair<std::string, int>> ParseLeaderAddress(absl::string_view address);

// Rank 0. Thread-safety: all methods from one thread; the rendezvous thread is internal.
class RendezvousLeader {
 public:
  // Listens on host:port (port 0 = a free one) and serves the protocol on a thread of its own.
  static absl::StatusOr<std::unique_ptr<RendezvousLeader>> Start(const std::string& host, int port,
                                                                 std::string group_id,
                                                                 const RendezvousOptions& options,
                                                                 PeerLostCallback on_lost);
  // Closes every connection without kBye: followers that are still watching see their leader
  // lost (the group did not end in order).
  ~RendezvousLeader();

  int port() const { return port_; }
  // Blocks until ranks 1..size-1 have all joined (OK), join_timeout passed since Start
  // (DEADLINE_EXCEEDED naming the missing ranks), or a joined follower was lost (its status).
  absl::Status WaitForFollowers();
  // The group ended in order: sends kBye to every follower and stops watching them.
  void Finish();
  // Connections closed for not speaking the protocol (tests).
  int strangers_closed() const;

 private:
  struct Peer {
    rendezvous::Socket socket;
    rendezvous::FrameReader reader;
    rendezvous::Clock::time_point deadline;  // pending: handshake; follower: heartbeat
  };

  RendezvousLeader(rendezvous::Socket listener, std::string group_id,
                   const RendezvousOptions& options, PeerLostCallback on_lost);
  void Loop();
  void AcceptNew();
  // Each returns false when the connection must be dropped from its list.
  bool ServePending(Peer& peer);
  bool ServeFollower(int rank, Peer& peer);
  void CheckDeadlines(rendezvous::Clock::time_point now);
  void SendHeartbeats();
  void Admit(Peer& peer, const rendezvous::Frame& hello);
  void Lose(absl::Status why);
  void StopLoop();
  bool lost() const;

  const std::string group_id_;
  const RendezvousOptions options_;
  const PeerLostCallback on_lost_;
  const rendezvous::Clock::time_point join_deadline_;
  rendezvous::Socket listener_;
  int port_ = 0;
  rendezvous::Waker waker_;
  // Owned by the rendezvous thread while it runs; by the caller once it has been joined.
  std::vector<std::unique_ptr<Peer>> pending_;
  std::map<int, std::unique_ptr<Peer>> followers_;
  rendezvous::Clock::time_point next_heartbeat_;

  // std::mutex rather than absl::Mutex so that ThreadSanitizer sees the locking (the system
  // Abseil is not instrumented).
  mutable std::mutex mu_;
  std::condition_variable changed_;  // joined_, lost_
  std::vector<bool> joined_;         // by rank; guarded by mu_
  int n_joined_ = 0;                 // guarded by mu_
  absl::Status lost_;                // guarded by mu_
  bool stop_ = false;                // guarded by mu_
  int strangers_closed_ = 0;         // guarded by mu_
  std::thread thread_;
};

// Ranks 1..size-1. Thread-safety: all methods from one thread; the watchdog thread is internal.
class RendezvousFollower {
 public:
  // Joins the leader at host:port as `rank`: retries (backoff from 50 ms to 2 s) while the
  // leader cannot be reached or does not answer, calling `on_retry` with each reason, until
  // join_timeout (DEADLINE_EXCEEDED with the last reason). A refusal, a welcome that does not
  // match, or a peer that does not speak the protocol fail at once (FAILED_PRECONDITION). Once
  // joined, watches the leader until Finish or destruction.
  static absl::StatusOr<std::unique_ptr<RendezvousFollower>> Join(
      const std::string& host, int port, int rank, const RendezvousOptions& options,
      PeerLostCallback on_lost, std::function<void(const absl::Status&)> on_retry = nullptr);
  // Closes the connection without kBye (the leader sees this rank lost).
  ~RendezvousFollower();

  const std::string& group_id() const { return group_id_; }
  // This rank leaves in order: sends kBye and stops watching.
  void Finish();

 private:
  RendezvousFollower(rendezvous::Socket socket, std::string group_id,
                     const RendezvousOptions& options, PeerLostCallback on_lost);
  void Watch();
  void StopWatch();

  rendezvous::Socket socket_;
  const std::string group_id_;
  const RendezvousOptions options_;
  const PeerLostCallback on_lost_;
  rendezvous::Waker waker_;
  std::mutex mu_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace splitspec::verifier

#endif  // SPLITSPEC_VERIFIER_TP_RENDEZVOUS_H_
