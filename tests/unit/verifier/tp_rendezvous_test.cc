// The rendezvous of a multi-process tensor-parallel group (verifier/tp_rendezvous.h), without
// NCCL: fake group ids, leader and followers as threads of this process on loopback, and raw
// sockets playing strangers, silent peers and a leader that stops answering. Every wait is on
// an event (a callback's notification, a socket's end); the bounds only stop a broken build
// from hanging.
#include "verifier/tp_rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"
#include "verifier/tp_membership.h"
#include "verifier/tp_rendezvous_wire.h"

namespace splitspec::verifier {
namespace {

using rendezvous::EncodeFrame;
using rendezvous::Frame;
using rendezvous::FrameReader;
using rendezvous::FrameType;
using ::testing::HasSubstr;

constexpr absl::Duration kEventBound = absl::Seconds(20);
const std::string kGroupId(128, '\x5a');  // the size of an NCCL unique id

// A one-shot event on std:: primitives (which ThreadSanitizer sees, unlike the system Abseil).
class Event {
 public:
  void Notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      notified_ = true;
    }
    cv_.notify_all();
  }
  bool HasBeenNotified() {
    std::lock_guard<std::mutex> lock(mu_);
    return notified_;
  }
  bool WaitWithTimeout(absl::Duration bound) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoMilliseconds(bound), [this] { return notified_; });
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return notified_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool notified_ = false;
};

// Records the first loss a rendezvous reports.
class LossRecorder {
 public:
  PeerLostCallback callback() {
    return [this](const absl::Status& why) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (++calls_ == 1) status_ = why;
      }
      fired_.Notify();
    };
  }
  bool WaitFired() { return fired_.WaitWithTimeout(kEventBound); }
  absl::Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  Event fired_;
  absl::Status status_;
  int calls_ = 0;
};

RendezvousOptions Options(int group_size) {
  RendezvousOptions options;
  options.group_size = group_size;
  options.join_timeout = absl::Seconds(30);
  options.heartbeat_timeout = absl::Seconds(30);
  options.handshake_timeout = absl::Seconds(30);
  return options;
}

// A blocking loopback client for playing peers that do not follow the protocol.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    timeval timeout{static_cast<time_t>(absl::ToInt64Seconds(kEventBound)), 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~RawClient() { Close(); }
  bool connected() const { return connected_; }
  void Send(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // Reads until the peer closes; false when it did not within the bound.
  bool ReadUntilClosed(std::string* got = nullptr) {
    char buffer[4096];
    while (true) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
      if (got != nullptr) got->append(buffer, static_cast<size_t>(n));
    }
  }
  // Reads one whole frame (blocking).
  absl::StatusOr<Frame> ReadFrame() {
    char buffer[4096];
    while (true) {
      absl::StatusOr<std::optional<Frame>> frame = reader_.Next();
      if (!frame.ok()) return frame.status();
      if (frame->has_value()) return **frame;
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return absl::UnavailableError("closed");
      reader_.Feed(absl::string_view(buffer, static_cast<size_t>(n)));
    }
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
  bool connected_ = false;
  FrameReader reader_;
};

// A listening loopback socket that is not a rendezvous leader.
class RawServer {
 public:
  RawServer() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ::listen(fd_, 8);
    socklen_t size = sizeof(address);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
  }
  ~RawServer() {
    if (fd_ >= 0) ::close(fd_);
  }
  int port() const { return port_; }
  int Accept() { return ::accept(fd_, nullptr, nullptr); }
  void Close() {
    ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
  int port_ = 0;
};

absl::StatusOr<std::unique_ptr<RendezvousFollower>> JoinLocal(int port, int rank,
                                                              const RendezvousOptions& options,
                                                              LossRecorder& loss) {
  return RendezvousFollower::Join("127.0.0.1", port, rank, options, loss.callback());
}

// --- frames -------------------------------------------------------------------------------

TEST(RendezvousWireTest, EveryFrameRoundTripsFedOneByteAtATime) {
  const std::vector<Frame> frames = {{FrameType::kHello, 4, 3, {}},
                                     {FrameType::kWelcome, 4, 3, kGroupId},
                                     {FrameType::kRefuse, 0, 0, "rank 3 has already joined"},
                                     {FrameType::kHeartbeat, 0, 0, {}},
                                     {FrameType::kBye, 0, 0, {}}};
  std::string stream;
  for (const Frame& f : frames) stream += EncodeFrame(f);
  FrameReader reader;
  std::vector<Frame> got;
  for (char c : stream) {
    reader.Feed(absl::string_view(&c, 1));
    absl::StatusOr<std::optional<Frame>> frame = reader.Next();
    ASSERT_TRUE(frame.ok()) << frame.status();
    if (frame->has_value()) got.push_back(**frame);
  }
  ASSERT_EQ(got.size(), frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(got[i].type, frames[i].type);
    EXPECT_EQ(got[i].group_size, frames[i].group_size);
    EXPECT_EQ(got[i].rank, frames[i].rank);
    EXPECT_EQ(got[i].bytes, frames[i].bytes);
  }
}

TEST(RendezvousWireTest, MalformedHeadersAreRefusedAndTheErrorStays) {
  const std::string hello = EncodeFrame(Frame{FrameType::kHello, 2, 1, {}});
  auto with_byte = [&](size_t at, char value) {
    std::string bytes = hello;
    bytes[at] = value;
    return bytes;
  };
  const std::string huge_welcome =
      EncodeFrame(Frame{FrameType::kWelcome, 2, 1, std::string(2000, 'x')});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"GET / HTTP/1.1\r\n\r\n", "bad magic"},
      {with_byte(5, 9), "version 9"},
      {with_byte(7, 42), "unknown rendezvous frame type 42"},
      {with_byte(11, 9), "with 9 payload bytes"},  // a hello is 8 bytes
      {huge_welcome, "payload bytes"},
      {EncodeFrame(Frame{FrameType::kRefuse, 0, 0, std::string(600, 'r')}), "payload bytes"},
  };
  for (const auto& [bytes, why] : cases) {
    FrameReader reader;
    reader.Feed(bytes);
    absl::StatusOr<std::optional<Frame>> frame = reader.Next();
    ASSERT_FALSE(frame.ok()) << why;
    EXPECT_THAT(frame.status().message(), HasSubstr(why));
    reader.Feed(hello);
    EXPECT_FALSE(reader.Next().ok()) << "a stream that broke once stays broken: " << why;
  }
}

TEST(RendezvousWireTest, LeaderAddresses) {
  EXPECT_EQ(*ParseLeaderAddress("verifier-0.verifier:50060"),
            std::make_pair(std::string("verifier-0.verifier"), 50060));
  EXPECT_EQ(*ParseLeaderAddress("[::1]:7"), std::make_pair(std::string("::1"), 7));
  for (const char* bad : {"verifier-0", ":50060", "host:", "host:0", "host:70000", "host:12ab"}) {
    EXPECT_FALSE(ParseLeaderAddress(bad).ok()) << bad;
  }
}

// --- joining --------------------------------------------------------------------------------

TEST(RendezvousTest, EveryFollowerReceivesTheGroupIdAndAnOrderlyEndLosesNoOne) {
  LossRecorder leader_loss, loss1, loss2, loss3;
  auto leader =
      RendezvousLeader::Start("127.0.0.1", 0, kGroupId, Options(4), leader_loss.callback());
  ASSERT_TRUE(leader.ok()) << leader.status();
  absl::StatusOr<std::unique_ptr<RendezvousFollower>> f1, f2, f3;
  std::thread t3([&] { f3 = JoinLocal((*leader)->port(), 3, Options(4), loss3); });
  std::thread t1([&] { f1 = JoinLocal((*leader)->port(), 1, Options(4), loss1); });
  std::thread t2([&] { f2 = JoinLocal((*leader)->port(), 2, Options(4), loss2); });
  EXPECT_TRUE((*leader)->WaitForFollowers().ok());
  t1.join();
  t2.join();
  t3.join();
  for (auto* f : {&f1, &f2, &f3}) {
    ASSERT_TRUE(f->ok()) << f->status();
    EXPECT_EQ((**f)->group_id(), kGroupId);
  }
  (*f1)->Finish();
  (*f2)->Finish();
  (*f3)->Finish();
  (*leader)->Finish();
  EXPECT_EQ(leader_loss.calls() + loss1.calls() + loss2.calls() + loss3.calls(), 0);
}

TEST(RendezvousTest, AFollowerThatStartsFirstRetriesUntilTheLeaderListens) {
  int port = 0;
  {
    RawServer reserve;  // a port nothing listens on once closed
    port = reserve.port();
  }
  Event retried;
  LossRecorder leader_loss, loss;
  absl::StatusOr<std::unique_ptr<RendezvousFollower>> follower;
  std::thread t([&] {
    follower = RendezvousFollower::Join("127.0.0.1", port, 1, Options(2), loss.callback(),
                                        [&](const absl::Status& why) {
                                          EXPECT_TRUE(absl::IsUnavailable(why)) << why;
                                          if (!retried.HasBeenNotified()) retried.Notify();
                                        });
  });
  ASSERT_TRUE(retried.WaitWithTimeout(kEventBound));
  auto leader =
      RendezvousLeader::Start("127.0.0.1", port, kGroupId, Options(2), leader_loss.callback());
  ASSERT_TRUE(leader.ok()) << leader.status();
  t.join();
  ASSERT_TRUE(follower.ok()) << follower.status();
  EXPECT_EQ((*follower)->group_id(), kGroupId);
  EXPECT_TRUE((*leader)->WaitForFollowers().ok());
}

TEST(RendezvousTest, ASecondFollowerClaimingARankIsRefused) {
  LossRecorder leader_loss, loss1, loss1b, loss2;
  auto leader =
      RendezvousLeader::Start("127.0.0.1", 0, kGroupId, Options(3), leader_loss.callback());
  ASSERT_TRUE(leader.ok());
  auto first = JoinLocal((*leader)->port(), 1, Options(3), loss1);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = JoinLocal((*leader)->port(), 1, Options(3), loss1b);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr("rank 1 has already joined"));
  auto rank2 = JoinLocal((*leader)->port(), 2, Options(3), loss2);
  ASSERT_TRUE(rank2.ok()) << rank2.status();
  EXPECT_TRUE((*leader)->WaitForFollowers().ok());
  EXPECT_EQ(leader_loss.calls(), 0) << "a refused duplicate is not a lost follower";
}

TEST(RendezvousTest, AWrongGroupSizeOrRankIsRefusedAtOnce) {
  LossRecorder leader_loss, loss;
  RendezvousOptions options = Options(2);
  auto leader = RendezvousLeader::Start("127.0.0.1", 0, kGroupId, options, leader_loss.callback());
  ASSERT_TRUE(leader.ok());
  RendezvousOptions wrong = Options(3);
  wrong.join_timeout = absl::Hours(1);  // a refusal must not be retried until this passes
  auto refused = JoinLocal((*leader)->port(), 1, wrong, loss);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("group has 2 ranks, the follower expects 3"));
  // Ranks the library would not send itself, from a raw peer: the leader and out of range.
  for (uint32_t rank : {0u, 2u, 4000000000u}) {
    RawClient client((*leader)->port());
    ASSERT_TRUE(client.connected());
    client.Send(EncodeFrame(Frame{FrameType::kHello, 2, rank, {}}));
    absl::StatusOr<Frame> answer = client.ReadFrame();
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->type, FrameType::kRefuse) << rank;
    EXPECT_THAT(answer->bytes, HasSubstr("is not a follower rank")) << rank;
    EXPECT_TRUE(client.ReadUntilClosed());
  }
  EXPECT_FALSE(JoinLocal((*leader)->port(), 0, options, loss).ok()) << "rank 0 is the leader";
  EXPECT_EQ(leader_loss.calls(), 0);
}

TEST(RendezvousTest, BytesFromStrangersAreClosedAndTheGroupStillForms) {
  LossRecorder leader_loss, loss;
  RendezvousOptions options = Options(2);
  options.handshake_timeout = absl::Milliseconds(200);
  auto leader = RendezvousLeader::Start("127.0.0.1", 0, kGroupId, options, leader_loss.callback());
  ASSERT_TRUE(leader.ok());
  const int port = (*leader)->port();
  std::string bad_version = EncodeFrame(Frame{FrameType::kHello, 2, 1, {}});
  bad_version[5] = 7;
  std::string huge = EncodeFrame(Frame{FrameType::kHello, 2, 1, {}});
  huge[8] = '\x7f';  // a payload of ~2 GiB
  const std::vector<std::string> garbage = {
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
      bad_version,
      huge,
      EncodeFrame(Frame{FrameType::kHeartbeat, 0, 0, {}}),  // a frame, but not a hello
      EncodeFrame(Frame{FrameType::kWelcome, 2, 1, "forged"}),
      std::string("\x53\x53", 2),  // a partial header, then silence: the handshake times out
      "",                          // says nothing at all
  };
  std::vector<std::unique_ptr<RawClient>> strangers;
  for (const std::string& bytes : garbage) {
    strangers.push_back(std::make_unique<RawClient>(port));
    ASSERT_TRUE(strangers.back()->connected());
    if (!bytes.empty()) strangers.back()->Send(bytes);
  }
  // One that sends a partial hello and hangs up.
  {
    RawClient quitter(port);
    quitter.Send(EncodeFrame(Frame{FrameType::kHello, 2, 1, {}}).substr(0, 13));
  }
  for (auto& stranger : strangers) {
    std::string answer;
    EXPECT_TRUE(stranger->ReadUntilClosed(&answer)) << "the leader closes every stranger";
    EXPECT_TRUE(answer.empty()) << "and tells it nothing";
  }
  auto follower = JoinLocal(port, 1, options, loss);
  ASSERT_TRUE(follower.ok()) << follower.status();
  EXPECT_EQ((*follower)->group_id(), kGroupId);
  EXPECT_TRUE((*leader)->WaitForFollowers().ok());
  EXPECT_GE((*leader)->strangers_closed(), static_cast<int>(garbage.size()));
  EXPECT_EQ(leader_loss.calls(), 0);
}

TEST(RendezvousTest, APeerThatIsNotALeaderFailsTheJoinAtOnce) {
  RawServer server;
  std::thread peer([&] {
    const int fd = server.Accept();
    const std::string reply = "SSH-2.0-OpenSSH_9.2\r\n";
    ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
    char buffer[256];
    while (::recv(fd, buffer, sizeof(buffer), 0) > 0) {
    }
    ::close(fd);
  });
  LossRecorder loss;
  RendezvousOptions options = Options(2);
  options.join_timeout = absl::Hours(1);
  auto follower = JoinLocal(server.port(), 1, options, loss);
  ASSERT_FALSE(follower.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(follower.status())) << follower.status();
  EXPECT_THAT(follower.status().message(), HasSubstr("is not a splitspec tensor-parallel leader"));
  peer.join();
}

// --- bounded waits --------------------------------------------------------------------------

TEST(RendezvousTest, AFollowerGivesUpOnAnAbsentLeaderAfterItsJoinTimeout) {
  int port = 0;
  {
    RawServer reserve;
    port = reserve.port();
  }
  LossRecorder loss;
  RendezvousOptions options = Options(2);
  options.join_timeout = absl::Milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  auto follower = JoinLocal(port, 1, options, loss);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(follower.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(follower.status())) << follower.status();
  EXPECT_THAT(follower.status().message(),
              HasSubstr("no tensor-parallel leader answered at 127.0.0.1:"));
  EXPECT_THAT(follower.status().message(), HasSubstr("refused"));  // the last reason
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::seconds(10));
}

TEST(RendezvousTest, ALeaderNamesTheRanksThatDidNotJoinInTime) {
  LossRecorder leader_loss, loss;
  RendezvousOptions options = Options(4);
  options.join_timeout = absl::Milliseconds(300);
  auto leader = RendezvousLeader::Start("127.0.0.1", 0, kGroupId, options, leader_loss.callback());
  ASSERT_TRUE(leader.ok());
  auto rank2 = JoinLocal((*leader)->port(), 2, options, loss);
  ASSERT_TRUE(rank2.ok()) << rank2.status();
  const absl::Status waited = (*leader)->WaitForFollowers();
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited)) << waited;
  EXPECT_THAT(waited.message(), HasSubstr("rank(s) 1, 3 of 4 did not join"));
}

// --- losing a peer --------------------------------------------------------------------------

TEST(RendezvousTest, AFollowerWhoseLeaderExitsIsToldSo) {
  LossRecorder leader_loss, loss;
  auto leader =
      RendezvousLeader::Start("127.0.0.1", 0, kGroupId, Options(2), leader_loss.callback());
  ASSERT_TRUE(leader.ok());
  auto follower = JoinLocal((*leader)->port(), 1, Options(2), loss);
  ASSERT_TRUE(follower.ok()) << follower.status();
  ASSERT_TRUE((*leader)->WaitForFollowers().ok());
  leader->reset();  // no kBye: as if the process died
  ASSERT_TRUE(loss.WaitFired());
  EXPECT_TRUE(absl::IsUnavailable(loss.status())) << loss.status();
  EXPECT_THAT(loss.status().message(), HasSubstr("lost the tensor-parallel leader"));
  (*follower).reset();
  EXPECT_EQ(loss.calls(), 1);
}

TEST(RendezvousTest, AFollowerWhoseLeaderFallsSilentIsToldAfterTheHeartbeatTimeout) {
  RawServer server;
  Event release;
  std::thread silent_leader([&] {
    const int fd = server.Accept();
    FrameReader reader;
    char buffer[256];
    std::optional<Frame> hello;
    while (!hello.has_value()) {
      const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      reader.Feed(absl::string_view(buffer, static_cast<size_t>(n)));
      hello = *reader.Next();
    }
    const std::string welcome = EncodeFrame(Frame{FrameType::kWelcome, 2, 1, kGroupId});
    ::send(fd, welcome.data(), welcome.size(), MSG_NOSIGNAL);
    release.Wait();  // connected, reading nothing, sending nothing
    ::close(fd);
  });
  LossRecorder loss;
  RendezvousOptions options = Options(2);
  options.heartbeat_timeout = absl::Milliseconds(300);
  auto follower = JoinLocal(server.port(), 1, options, loss);
  ASSERT_TRUE(follower.ok()) << follower.status();
  const auto joined = std::chrono::steady_clock::now();
  ASSERT_TRUE(loss.WaitFired());
  EXPECT_GE(std::chrono::steady_clock::now() - joined, std::chrono::milliseconds(300));
  EXPECT_TRUE(absl::IsUnavailable(loss.status()));
  EXPECT_THAT(loss.status().message(), HasSubstr("no heartbeat for 300ms"));
  release.Notify();
  silent_leader.join();
}

TEST(RendezvousTest, ALeaderWhoseFollowerExitsIsToldWhichRank) {
  LossRecorder leader_loss, loss1, loss2;
  auto leader =
      RendezvousLeader::Start("127.0.0.1", 0, kGroupId, Options(3), leader_loss.callback());
  ASSERT_TRUE(leader.ok());
  auto f1 = JoinLocal((*leader)->port(), 1, Options(3), loss1);
  auto f2 = JoinLocal((*leader)->port(), 2, Options(3), loss2);
  ASSERT_TRUE(f1.ok() && f2.ok());
  ASSERT_TRUE((*leader)->WaitForFollowers().ok());
  // Rank 1 leaves in order first, so the loss that follows can only be rank 2's.
  (*f1)->Finish();
  f2->reset();  // no kBye
  ASSERT_TRUE(leader_loss.WaitFired());
  EXPECT_TRUE(absl::IsUnavailable(leader_loss.status())) << leader_loss.status();
  EXPECT_THAT(leader_loss.status().message(), HasSubstr("lost tensor-parallel rank 2"));
  EXPECT_EQ(leader_loss.calls(), 1);
}

TEST(RendezvousTest, ALeaderWhoseFollowerFallsSilentIsToldAfterTheHeartbeatTimeout) {
  LossRecorder leader_loss;
  RendezvousOptions options = Options(2);
  options.heartbeat_timeout = absl::Milliseconds(300);
  auto leader = RendezvousLeader::Start("127.0.0.1", 0, kGroupId, options, leader_loss.callback());
  ASSERT_TRUE(leader.ok());
  RawClient follower((*leader)->port());
  follower.Send(EncodeFrame(Frame{FrameType::kHello, 2, 1, {}}));
  absl::StatusOr<Frame> welcome = follower.ReadFrame();
  ASSERT_TRUE(welcome.ok()) << welcome.status();
  ASSERT_EQ(welcome->type, FrameType::kWelcome);
  EXPECT_EQ(welcome->bytes, kGroupId);
  const auto joined = std::chrono::steady_clock::now();
  ASSERT_TRUE((*leader)->WaitForFollowers().ok());
  ASSERT_TRUE(leader_loss.WaitFired());  // the raw follower never sends a heartbeat
  EXPECT_GE(std::chrono::steady_clock::now() - joined, std::chrono::milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(leader_loss.status())) << leader_loss.status();
  EXPECT_THAT(leader_loss.status().message(),
              HasSubstr("lost tensor-parallel rank 1: no heartbeat"));
}

TEST(RendezvousTest, HeartbeatsKeepAQuietGroupAliveBeyondTheTimeout) {
  // Heartbeats against a 200 ms timeout. The clock is a stranger that the leader closes at its
  // own 1 s handshake deadline: the same loop checks the follower's heartbeat deadline first,
  // so by the time the stranger is closed, five timeouts have passed without a loss.
  LossRecorder leader_loss, loss;
  RendezvousOptions options = Options(2);
  options.heartbeat_timeout = absl::Milliseconds(200);
  options.handshake_timeout = absl::Seconds(1);
  auto leader = RendezvousLeader::Start("127.0.0.1", 0, kGroupId, options, leader_loss.callback());
  ASSERT_TRUE(leader.ok());
  auto follower = JoinLocal((*leader)->port(), 1, options, loss);
  ASSERT_TRUE(follower.ok());
  const auto start = std::chrono::steady_clock::now();
  RawClient clock((*leader)->port());
  EXPECT_TRUE(clock.ReadUntilClosed());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  (*follower)->Finish();
  (*leader)->Finish();
  EXPECT_EQ(leader_loss.calls(), 0) << leader_loss.status();
  EXPECT_EQ(loss.calls(), 0) << loss.status();
}

// --- membership: the file way and the network way, as the binary uses them ----------------

void NoLog(const std::string&) {}

TEST(TpMembershipTest, FlagCombinationsAreCheckedWithTheFlagsNamed) {
  auto with = [](int rank, std::string id_file, int leader_port, std::string leader) {
    TpMembershipOptions o;
    o.group_size = 2;
    o.rank = rank;
    o.id_file = std::move(id_file);
    o.leader_port = leader_port;
    o.leader = std::move(leader);
    return CheckTpMembershipOptions(o);
  };
  EXPECT_TRUE(with(0, "", 50060, "").ok());
  EXPECT_TRUE(with(1, "", -1, "verifier-0.verifier:50060").ok());
  EXPECT_TRUE(with(0, "/tmp/id", -1, "").ok());
  EXPECT_TRUE(with(1, "/tmp/id", -1, "").ok());
  const std::vector<std::pair<absl::Status, std::string>> errors = {
      {with(1, "", -1, ""), "--tp-rank needs --tp-leader-port P on rank 0 and --tp-leader HOST:P"},
      {with(0, "/tmp/id", 50060, ""), "use one"},
      {with(0, "", -1, "host:50060"), "rank 0 is the leader"},
      {with(1, "", 50060, ""), "--tp-leader-port is rank 0's"},
      {with(1, "", -1, "host"), "--tp-leader: leader address \"host\" is not HOST:PORT"},
      {with(0, "", 70000, ""), "rank 0 needs --tp-leader-port P (0..65535)"},
  };
  for (const auto& [status, fragment] : errors) {
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << fragment;
    EXPECT_THAT(status.message(), HasSubstr(fragment));
  }
}

TEST(TpMembershipTest, TheFileWayHandsRankZerosIdToTheOthers) {
  splitspec::testing::ScopedTempDir dir("tp_membership_");
  TpMembershipOptions o;
  o.group_size = 2;
  o.id_file = dir.path() + "/group-id";
  o.rank = 1;
  auto early = TpMembership::Join(o, nullptr, nullptr, NoLog);
  ASSERT_FALSE(early.ok());
  EXPECT_THAT(early.status().message(), HasSubstr("start rank 0 first"));
  o.rank = 0;
  auto rank0 = TpMembership::Join(
      o, [] { return absl::StatusOr<std::string>(kGroupId); }, nullptr, NoLog);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  o.rank = 1;
  auto rank1 = TpMembership::Join(o, nullptr, nullptr, NoLog);
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_EQ((*rank1)->group_id(), kGroupId);
}

TEST(TpMembershipTest, TheNetworkWayHandsRankZerosIdToTheOthers) {
  int port = 0;
  {
    RawServer reserve;
    port = reserve.port();
  }
  TpMembershipOptions o;
  o.group_size = 3;
  o.listen_host = "127.0.0.1";
  o.join_timeout = absl::Seconds(30);
  LossRecorder loss0, loss1, loss2;
  absl::StatusOr<std::unique_ptr<TpMembership>> rank0, rank1, rank2;
  std::thread t0([&] {
    TpMembershipOptions r = o;
    r.leader_port = port;
    rank0 = TpMembership::Join(
        r, [] { return absl::StatusOr<std::string>(kGroupId); }, loss0.callback(), NoLog);
  });
  std::thread t1([&] {
    TpMembershipOptions r = o;
    r.rank = 1;
    r.leader = absl::StrCat("127.0.0.1:", port);
    rank1 = TpMembership::Join(r, nullptr, loss1.callback(), NoLog);
  });
  std::thread t2([&] {
    TpMembershipOptions r = o;
    r.rank = 2;
    r.leader = absl::StrCat("localhost:", port);
    rank2 = TpMembership::Join(r, nullptr, loss2.callback(), NoLog);
  });
  t0.join();
  t1.join();
  t2.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ASSERT_TRUE(rank2.ok()) << rank2.status();
  EXPECT_EQ((*rank1)->group_id(), kGroupId);
  EXPECT_EQ((*rank2)->group_id(), kGroupId);
  // Rank 2 dies: rank 0 is told; rank 0 then goes too, and rank 1 is told.
  rank2->reset();
  ASSERT_TRUE(loss0.WaitFired());
  EXPECT_THAT(loss0.status().message(), HasSubstr("lost tensor-parallel rank 2"));
  rank0->reset();
  ASSERT_TRUE(loss1.WaitFired());
  EXPECT_THAT(loss1.status().message(), HasSubstr("lost the tensor-parallel leader"));
}

}  // namespace
}  // namespace splitspec::verifier
