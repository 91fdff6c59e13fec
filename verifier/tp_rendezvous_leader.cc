// Rank 0's side of the rendezvous (see tp_rendezvous.h): one thread polls the listener, the
// connections still in their handshake, and the joined followers.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verifier/tp_rendezvous.h"

namespace splitspec::verifier {
namespace {

using rendezvous::Clock;
using rendezvous::Frame;
using rendezvous::FrameType;

// Strangers that connect and say nothing are closed after handshake_timeout; this bounds how
// many may wait at once (the rest are closed on arrival).
constexpr size_t kMaxPendingConnections = 32;

// Capped at a year, so that "forever" added to now cannot overflow.
Clock::duration ToClock(absl::Duration d) {
  return std::chrono::duration_cast<Clock::duration>(
      absl::ToChronoNanoseconds(std::min(d, absl::Hours(24 * 365))));
}

}  // namespace

absl::StatusOr<std::pair<std::string, int>> ParseLeaderAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("leader address \"", address, "\" is not HOST:PORT"));
  }
  absl::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("leader address \"", address, "\" has no port in [1, 65535]"));
  }
  return std::make_pair(std::string(host), port);
}

absl::StatusOr<std::unique_ptr<RendezvousLeader>> RendezvousLeader::Start(
    const std::string& host, int port, std::string group_id, const RendezvousOptions& options,
    PeerLostCallback on_lost) {
  if (options.group_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("group size ", options.group_size, " < 1"));
  }
  if (group_id.empty() || group_id.size() > rendezvous::kMaxGroupIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a group id of ", group_id.size(), " bytes (1..",
                                                   rendezvous::kMaxGroupIdBytes, ")"));
  }
  if (options.heartbeat_timeout <= absl::ZeroDuration() ||
      options.handshake_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("rendezvous timeouts must be positive");
  }
  absl::StatusOr<rendezvous::Socket> listener = rendezvous::Listen(host, port);
  if (!listener.ok()) return listener.status();
  std::unique_ptr<RendezvousLeader> leader(
      new RendezvousLeader(std::move(*listener), std::move(group_id), options, std::move(on_lost)));
  leader->thread_ = std::thread([l = leader.get()] { l->Loop(); });
  return leader;
}

RendezvousLeader::RendezvousLeader(rendezvous::Socket listener, std::string group_id,
                                   const RendezvousOptions& options, PeerLostCallback on_lost)
    : group_id_(std::move(group_id)),
      options_(options),
      on_lost_(std::move(on_lost)),
      join_deadline_(rendezvous::Clock::now() + ToClock(options.join_timeout)),
      listener_(std::move(listener)),
      port_(rendezvous::LocalPort(listener_)),
      next_heartbeat_(Clock::now()),
      joined_(options.group_size, false) {}

RendezvousLeader::~RendezvousLeader() { StopLoop(); }

void RendezvousLeader::StopLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  waker_.Wake();
  if (thread_.joinable()) thread_.join();
}

bool RendezvousLeader::lost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !lost_.ok();
}

int RendezvousLeader::strangers_closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return strangers_closed_;
}

absl::Status RendezvousLeader::WaitForFollowers() {
  std::unique_lock<std::mutex> lock(mu_);
  const int wanted = options_.group_size - 1;
  changed_.wait_until(lock, join_deadline_, [&] { return n_joined_ == wanted || !lost_.ok(); });
  if (!lost_.ok()) return lost_;
  if (n_joined_ == wanted) return absl::OkStatus();
  std::vector<int> missing;
  for (int r = 1; r < options_.group_size; ++r) {
    if (!joined_[r]) missing.push_back(r);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "tensor-parallel rank(s) ", absl::StrJoin(missing, ", "), " of ", options_.group_size,
      " did not join within ", absl::FormatDuration(options_.join_timeout)));
}

void RendezvousLeader::Finish() {
  StopLoop();
  for (auto& [rank, peer] : followers_) {
    // A follower that is already gone cannot be told; the group is over either way.
    (void)rendezvous::SendFrame(peer->socket, Frame{FrameType::kBye, 0, 0, {}});
  }
  followers_.clear();
  pending_.clear();
}

void RendezvousLeader::Loop() {
  const Clock::duration heartbeat_period = ToClock(options_.heartbeat_timeout) / 3;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_ || !lost_.ok()) return;
    }
    std::vector<pollfd> fds = {{waker_.read_fd(), POLLIN, 0}, {listener_.fd(), POLLIN, 0}};
    Clock::time_point wake_at = next_heartbeat_;
    for (const auto& peer : pending_) {
      fds.push_back({peer->socket.fd(), POLLIN, 0});
      wake_at = std::min(wake_at, peer->deadline);
    }
    std::vector<int> polled_ranks;  // followers_ gains ranks while the pending are served
    for (const auto& [rank, peer] : followers_) {
      fds.push_back({peer->socket.fd(), POLLIN, 0});
      polled_ranks.push_back(rank);
      wake_at = std::min(wake_at, peer->deadline);
    }
    if (::poll(fds.data(), fds.size(), rendezvous::PollTimeoutMs(wake_at)) < 0 && errno != EINTR) {
      Lose(absl::InternalError(absl::StrCat("poll failed: ", std::strerror(errno))));
      return;
    }
    if (fds[0].revents != 0) waker_.Drain();
    // Serve the connections polled, by descriptor (Accept below adds new ones).
    size_t i = 2;
    std::vector<std::unique_ptr<Peer>> kept;
    for (auto& peer : pending_) {
      const bool ready = fds[i++].revents != 0;
      if (!ready || ServePending(*peer)) kept.push_back(std::move(peer));
    }
    pending_ = std::move(kept);
    for (const int rank : polled_ranks) {
      if (fds[i++].revents == 0) continue;
      if (!ServeFollower(rank, *followers_.at(rank))) followers_.erase(rank);
      if (lost()) return;
    }
    if (lost()) return;
    if (fds[1].revents != 0) AcceptNew();
    const Clock::time_point now = Clock::now();
    CheckDeadlines(now);
    if (now >= next_heartbeat_) {
      SendHeartbeats();
      next_heartbeat_ = now + heartbeat_period;
    }
  }
}

void RendezvousLeader::AcceptNew() {
  while (true) {
    rendezvous::Socket socket = rendezvous::AcceptOne(listener_);
    if (!socket.valid()) return;
    if (pending_.size() >= kMaxPendingConnections) {
      std::lock_guard<std::mutex> lock(mu_);
      ++strangers_closed_;
      continue;  // closed as it goes out of scope
    }
    auto peer = std::make_unique<Peer>();
    peer->socket = std::move(socket);
    peer->deadline = Clock::now() + ToClock(options_.handshake_timeout);
    pending_.push_back(std::move(peer));
  }
}

bool RendezvousLeader::ServePending(Peer& peer) {
  const absl::Status received = rendezvous::ReceiveInto(peer.socket, &peer.reader);
  absl::StatusOr<std::optional<Frame>> frame = peer.reader.Next();
  if (frame.ok() && !frame->has_value() && received.ok()) return true;  // more bytes to come
  if (!frame.ok() || !frame->has_value() || (*frame)->type != FrameType::kHello) {
    std::lock_guard<std::mutex> lock(mu_);
    ++strangers_closed_;
    return false;
  }
  Admit(peer, **frame);
  return false;  // moved to followers_, or refused and closed
}

void RendezvousLeader::Admit(Peer& peer, const Frame& hello) {
  const int size = options_.group_size;
  std::string refusal;
  if (hello.group_size != static_cast<uint32_t>(size)) {
    refusal = absl::StrCat("the leader's group has ", size, " ranks, the follower expects ",
                           hello.group_size);
  } else if (hello.rank == 0 || hello.rank >= static_cast<uint32_t>(size)) {
    refusal = absl::StrCat("rank ", hello.rank, " is not a follower rank of a group of ", size,
                           " (1..", size - 1, ")");
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    if (joined_[hello.rank])
      refusal = absl::StrCat("rank ", hello.rank, " has already joined the group");
  }
  if (!refusal.empty()) {
    (void)rendezvous::SendFrame(peer.socket, Frame{FrameType::kRefuse, 0, 0, refusal});
    std::lock_guard<std::mutex> lock(mu_);
    ++strangers_closed_;
    return;
  }
  const int rank = static_cast<int>(hello.rank);
  if (!rendezvous::SendFrame(peer.socket,
                             Frame{FrameType::kWelcome, hello.group_size, hello.rank, group_id_})
           .ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++strangers_closed_;  // it left before it joined: it may connect again
    return;
  }
  auto follower = std::make_unique<Peer>();
  follower->socket = std::move(peer.socket);
  follower->reader = std::move(peer.reader);
  follower->deadline = Clock::now() + ToClock(options_.heartbeat_timeout);
  followers_[rank] = std::move(follower);
  {
    std::lock_guard<std::mutex> lock(mu_);
    joined_[rank] = true;
    ++n_joined_;
  }
  changed_.notify_all();
}

bool RendezvousLeader::ServeFollower(int rank, Peer& peer) {
  const absl::Status received = rendezvous::ReceiveInto(peer.socket, &peer.reader);
  while (true) {
    absl::StatusOr<std::optional<Frame>> frame = peer.reader.Next();
    if (!frame.ok()) {
      Lose(absl::UnavailableError(absl::StrCat("tensor-parallel rank ", rank,
                                               " broke the protocol: ", frame.status().message())));
      return false;
    }
    if (!frame->has_value()) break;
    if ((*frame)->type == FrameType::kBye) return false;  // left in order
    if ((*frame)->type != FrameType::kHeartbeat) {
      Lose(absl::UnavailableError(
          absl::StrCat("tensor-parallel rank ", rank, " sent an unexpected frame")));
      return false;
    }
    peer.deadline = Clock::now() + ToClock(options_.heartbeat_timeout);
  }
  if (!received.ok()) {
    Lose(absl::UnavailableError(
        absl::StrCat("lost tensor-parallel rank ", rank, ": ", received.message())));
    return false;
  }
  return true;
}

void RendezvousLeader::CheckDeadlines(Clock::time_point now) {
  const size_t before = pending_.size();
  pending_.erase(
      std::remove_if(pending_.begin(), pending_.end(),
                     [now](const std::unique_ptr<Peer>& p) { return now >= p->deadline; }),
      pending_.end());
  if (pending_.size() != before) {
    std::lock_guard<std::mutex> lock(mu_);
    strangers_closed_ += static_cast<int>(before - pending_.size());
  }
  for (const auto& [rank, peer] : followers_) {
    if (now >= peer->deadline) {
      Lose(absl::DeadlineExceededError(
          absl::StrCat("lost tensor-parallel rank ", rank, ": no heartbeat for ",
                       absl::FormatDuration(options_.heartbeat_timeout))));
      return;
    }
  }
}

void RendezvousLeader::SendHeartbeats() {
  for (const auto& [rank, peer] : followers_) {
    const absl::Status sent =
        rendezvous::SendFrame(peer->socket, Frame{FrameType::kHeartbeat, 0, 0, {}});
    if (!sent.ok()) {
      Lose(absl::UnavailableError(
          absl::StrCat("lost tensor-parallel rank ", rank, ": ", sent.message())));
      return;
    }
  }
}

void RendezvousLeader::Lose(absl::Status why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!lost_.ok()) return;
    lost_ = why;
  }
  changed_.notify_all();
  if (on_lost_) on_lost_(why);
}

}  // namespace splitspec::verifier
