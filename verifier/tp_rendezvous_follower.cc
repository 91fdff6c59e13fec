// Ranks 1..size-1 of the rendezvous (see tp_rendezvous.h): join with retries, then watch the
// leader on a thread of their own.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "verifier/tp_rendezvous.h"

namespace splitspec::verifier {
namespace {

using rendezvous::Clock;
using rendezvous::Frame;
using rendezvous::FrameType;

// Capped at a year, so that "forever" added to now cannot overflow.
Clock::duration ToClock(absl::Duration d) {
  return std::chrono::duration_cast<Clock::duration>(
      absl::ToChronoNanoseconds(std::min(d, absl::Hours(24 * 365))));
}

struct Joined {
  rendezvous::Socket socket;
  std::string group_id;
};

// Waits for the leader's answer to kHello. UNAVAILABLE (worth retrying) when the connection
// ends or nothing comes before `deadline`; FAILED_PRECONDITION for a refusal or a peer that
// does not speak the protocol.
absl::StatusOr<std::string> AwaitWelcome(const rendezvous::Socket& socket,
                                         const std::string& leader, int rank, int group_size,
                                         Clock::time_point deadline) {
  rendezvous::FrameReader reader;
  while (true) {
    if (!rendezvous::WaitReady(socket.fd(), POLLIN, deadline)) {
      return absl::UnavailableError(absl::StrCat("the leader at ", leader, " did not answer"));
    }
    const absl::Status received = rendezvous::ReceiveInto(socket, &reader);
    absl::StatusOr<std::optional<Frame>> frame = reader.Next();
    if (!frame.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          leader, " is not a splitspec tensor-parallel leader: ", frame.status().message()));
    }
    if (!frame->has_value()) {
      if (!received.ok()) {
        return absl::UnavailableError(
            absl::StrCat("the leader at ", leader, " closed the connection before answering"));
      }
      continue;
    }
    const Frame& answer = **frame;
    if (answer.type == FrameType::kRefuse) {
      return absl::FailedPreconditionError(
          absl::StrCat("the leader at ", leader, " refused rank ", rank, ": ", answer.bytes));
    }
    if (answer.type != FrameType::kWelcome) {
      return absl::FailedPreconditionError(
          absl::StrCat("the leader at ", leader, " answered out of protocol"));
    }
    if (answer.group_size != static_cast<uint32_t>(group_size) ||
        answer.rank != static_cast<uint32_t>(rank)) {
      return absl::FailedPreconditionError(absl::StrCat("the leader at ", leader, " welcomed rank ",
                                                        answer.rank, " of ", answer.group_size,
                                                        ", not rank ", rank, " of ", group_size));
    }
    return answer.bytes;
  }
}

absl::StatusOr<Joined> TryJoinOnce(const std::string& host, int port, int rank,
                                   const RendezvousOptions& options, Clock::time_point deadline) {
  const std::string leader = absl::StrCat(host, ":", port);
  absl::StatusOr<rendezvous::Socket> socket = rendezvous::Connect(host, port, deadline);
  if (!socket.ok()) return socket.status();
  const Frame hello{FrameType::kHello,
                    static_cast<uint32_t>(options.group_size),
                    static_cast<uint32_t>(rank),
                    {}};
  if (absl::Status sent = rendezvous::SendFrame(*socket, hello); !sent.ok()) return sent;
  const Clock::time_point answer_by =
      std::min(deadline, Clock::now() + ToClock(options.handshake_timeout));
  absl::StatusOr<std::string> id =
      AwaitWelcome(*socket, leader, rank, options.group_size, answer_by);
  if (!id.ok()) return id.status();
  return Joined{std::move(*socket), std::move(*id)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<RendezvousFollower>> RendezvousFollower::Join(
    const std::string& host, int port, int rank, const RendezvousOptions& options,
    PeerLostCallback on_lost, std::function<void(const absl::Status&)> on_retry) {
  if (rank < 1 || rank >= options.group_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is not a follower rank of a group of ", options.group_size));
  }
  if (options.heartbeat_timeout <= absl::ZeroDuration() ||
      options.handshake_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("rendezvous timeouts must be positive");
  }
  const Clock::time_point deadline = Clock::now() + ToClock(options.join_timeout);
  Clock::duration backoff = std::chrono::milliseconds(50);
  while (true) {
    absl::StatusOr<Joined> joined = TryJoinOnce(host, port, rank, options, deadline);
    if (joined.ok()) {
      std::unique_ptr<RendezvousFollower> follower(new RendezvousFollower(
          std::move(joined->socket), std::move(joined->group_id), options, std::move(on_lost)));
      follower->thread_ = std::thread([f = follower.get()] { f->Watch(); });
      return follower;
    }
    if (!absl::IsUnavailable(joined.status())) return joined.status();
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no tensor-parallel leader answered at ", host, ":", port, " within ",
          absl::FormatDuration(options.join_timeout), " (last: ", joined.status().message(), ")"));
    }
    if (on_retry) on_retry(joined.status());
    std::this_thread::sleep_for(std::min(backoff, deadline - Clock::now()));
    backoff = std::min<Clock::duration>(backoff * 2, std::chrono::seconds(2));
  }
}

RendezvousFollower::RendezvousFollower(rendezvous::Socket socket, std::string group_id,
                                       const RendezvousOptions& options, PeerLostCallback on_lost)
    : socket_(std::move(socket)),
      group_id_(std::move(group_id)),
      options_(options),
      on_lost_(std::move(on_lost)) {}

RendezvousFollower::~RendezvousFollower() { StopWatch(); }

void RendezvousFollower::StopWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  waker_.Wake();
  if (thread_.joinable()) thread_.join();
}

void RendezvousFollower::Finish() {
  StopWatch();
  // A leader that is already gone cannot be told; this rank is leaving either way.
  (void)rendezvous::SendFrame(socket_, Frame{FrameType::kBye, 0, 0, {}});
  socket_.Close();
}

void RendezvousFollower::Watch() {
  const Clock::duration heartbeat_period = ToClock(options_.heartbeat_timeout) / 3;
  rendezvous::FrameReader reader;
  Clock::time_point silent_until = Clock::now() + ToClock(options_.heartbeat_timeout);
  Clock::time_point next_heartbeat = Clock::now();
  auto lose = [&](const std::string& why) {
    if (on_lost_)
      on_lost_(absl::UnavailableError(absl::StrCat("lost the tensor-parallel leader: ", why)));
  };
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    const Clock::time_point now = Clock::now();
    if (now >= silent_until) {
      return lose(
          absl::StrCat("no heartbeat for ", absl::FormatDuration(options_.heartbeat_timeout)));
    }
    if (now >= next_heartbeat) {
      const absl::Status sent =
          rendezvous::SendFrame(socket_, Frame{FrameType::kHeartbeat, 0, 0, {}});
      if (!sent.ok()) return lose(std::string(sent.message()));
      next_heartbeat = now + heartbeat_period;
    }
    pollfd fds[2] = {{waker_.read_fd(), POLLIN, 0}, {socket_.fd(), POLLIN, 0}};
    if (::poll(fds, 2, rendezvous::PollTimeoutMs(std::min(silent_until, next_heartbeat))) < 0 &&
        errno != EINTR) {
      return lose(absl::StrCat("poll failed: ", std::strerror(errno)));
    }
    if (fds[0].revents != 0) waker_.Drain();
    if (fds[1].revents == 0) continue;
    const absl::Status received = rendezvous::ReceiveInto(socket_, &reader);
    while (true) {
      absl::StatusOr<std::optional<Frame>> frame = reader.Next();
      if (!frame.ok()) return lose(std::string(frame.status().message()));
      if (!frame->has_value()) break;
      if ((*frame)->type == FrameType::kBye) return;  // the group ended in order
      if ((*frame)->type != FrameType::kHeartbeat)
        return lose("the leader sent an unexpected frame");
      silent_until = Clock::now() + ToClock(options_.heartbeat_timeout);
    }
    if (!received.ok()) return lose(std::string(received.message()));
  }
}

}  // namespace splitspec::verifier
