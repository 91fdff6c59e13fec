// Step frames through shared memory (common/rpc/step_memory.h): the two mailboxes over a real
// socket pair, a sleeping reader woken by the doorbell, the socket's end and deadlines, the
// hand-over of the memory on a connection, a worker that has none, and how each frame was
// waited for (frame_pickup.h).
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/rpc/frame_pickup.h"
#include "common/rpc/step_memory.h"
#include "common/rpc/step_socket_client.h"
#include "common/rpc/step_socket_server.h"
#include "common/rpc/step_socket_wire.h"
#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace splitspec::rpc {
namespace {

using Side = StepMemory::Side;
using ::splitspec::testing::ScopedTempDir;

// A connection's two ends: a socket pair and one memory, the client's mapping passed through
// the socket as a worker passes it.
class MemoryPair : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0);
    absl::StatusOr<std::unique_ptr<StepMemory>> created = StepMemory::Create();
    ASSERT_TRUE(created.ok()) << created.status();
    server_ = *std::move(created);
    // The client asks, the server answers with the memory (as StepSocketServer does).
    auto opened = std::async(std::launch::async, [this] { return OpenStepMemory(client_fd(), absl::Now() + absl::Seconds(10)); });
    uint32_t word = 0;
    std::string payload;
    ASSERT_TRUE(ReadStepFrame(server_fd(), absl::Now() + absl::Seconds(10), &word, &payload).ok());
    ASSERT_EQ(word, static_cast<uint32_t>(StepMethod::kOpenMemory));
    ASSERT_TRUE(SendStepMemory(server_fd(), *server_).ok());
    absl::StatusOr<std::unique_ptr<StepMemory>> mapped = opened.get();
    ASSERT_TRUE(mapped.ok()) << mapped.status();
    ASSERT_NE(*mapped, nullptr);
    client_ = *std::move(mapped);
  }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  int client_fd() const { return fds_[0]; }
  int server_fd() const { return fds_[1]; }
  void CloseServerSocket() {
    close(fds_[1]);
    fds_[1] = -1;
  }

  int fds_[2] = {-1, -1};
  std::unique_ptr<StepMemory> client_;
  std::unique_ptr<StepMemory> server_;
};

std::string Binary(size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((i * 131 + 7) & 0xff);
  return bytes;
}

TEST_F(MemoryPair, CarriesRequestsAndAnswersBothWaysInTurn) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (const std::string& request : {std::string(), std::string("x"), Binary(1 << 20), Binary(300)}) {
    ASSERT_TRUE(client_->Write(Side::kClient, client_fd(), 7, request).ok());
    uint32_t word = 0;
    std::string got;
    ASSERT_TRUE(server_->Read(Side::kServer, server_fd(), deadline, &word, &got).ok());
    EXPECT_EQ(word, 7u);
    EXPECT_EQ(got, request);
    const std::string answer = "answer:" + std::to_string(request.size());
    ASSERT_TRUE(server_->Write(Side::kServer, server_fd(), 0, answer).ok());
    ASSERT_TRUE(client_->Read(Side::kClient, client_fd(), deadline, &word, &got).ok());
    EXPECT_EQ(word, 0u);
    EXPECT_EQ(got, answer);
  }
  EXPECT_TRUE(absl::IsResourceExhausted(
      client_->Write(Side::kClient, client_fd(), 7, std::string(kMaxStepPayloadBytes + 1, 'x'))));
}

// A reader asleep on the socket (no spin window) wakes for a frame published later: the writer
// sees it asleep and rings. Neither side has a timeout to fall back on: without the doorbell
// the read would wait for its deadline.
TEST_F(MemoryPair, ASleepingReaderIsRungAwake) {
  for (int i = 0; i < 50; ++i) {
    auto reader = std::async(std::launch::async, [this] {
      uint32_t word = 0;
      std::string got;
      const absl::Status s = server_->Read(Side::kServer, server_fd(), absl::Now() + absl::Seconds(30), &word, &got);
      return s.ok() ? got : std::string(s.message());
    });
    // Sometimes before the reader sleeps, sometimes after: both must deliver.
    if (i % 2 == 1) std::this_thread::yield();
    ASSERT_TRUE(client_->Write(Side::kClient, client_fd(), 1, "frame " + std::to_string(i)).ok());
    ASSERT_EQ(reader.get(), "frame " + std::to_string(i));
    ASSERT_TRUE(server_->Write(Side::kServer, server_fd(), 0, "ok").ok());
    uint32_t word = 0;
    std::string got;
    ASSERT_TRUE(client_->Read(Side::kClient, client_fd(), absl::Now() + absl::Seconds(30), &word, &got).ok());
  }
}

TEST_F(MemoryPair, APollingReaderReadsWithoutTheSocket) {
  const absl::Time now = absl::Now();
  auto reader = std::async(std::launch::async, [this, now] {
    uint32_t word = 0;
    std::string got;
    const absl::Status s = server_->Read(Side::kServer, server_fd(), now + absl::Seconds(30), &word, &got,
                                         SpinWindow{now, now + absl::Seconds(30)});
    return s.ok() ? got : std::string(s.message());
  });
  ASSERT_TRUE(client_->Write(Side::kClient, client_fd(), 1, "polled").ok());
  EXPECT_EQ(reader.get(), "polled");
}

TEST_F(MemoryPair, AClosedPeerEndsTheWaitButAFrameSentBeforeIsStillRead) {
  ASSERT_TRUE(server_->Write(Side::kServer, server_fd(), 0, "last words").ok());
  CloseServerSocket();
  uint32_t word = 0;
  std::string got;
  ASSERT_TRUE(client_->Read(Side::kClient, client_fd(), absl::Now() + absl::Seconds(10), &word, &got).ok());
  EXPECT_EQ(got, "last words");
  const absl::Status gone = client_->Read(Side::kClient, client_fd(), absl::Now() + absl::Seconds(10), &word, &got);
  EXPECT_TRUE(absl::IsUnavailable(gone)) << gone;
}

TEST_F(MemoryPair, ADeadlineEndsTheWaitInsideOrOutsideTheSpinWindow) {
  uint32_t word = 0;
  std::string got;
  const absl::Time now = absl::Now();
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      client_->Read(Side::kClient, client_fd(), now + absl::Milliseconds(20), &word, &got)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(client_->Read(Side::kClient, client_fd(), absl::Now() + absl::Milliseconds(20),
                                                     &word, &got, SpinWindow{now, now + absl::Hours(1)})));
}

// How a reader came by each frame (frame_pickup.h). A frame published before the read is
// "ready"; one that comes while the reader waits is put down to the reader's wait at that moment,
// which depends on where its window lies: polling inside it, asleep before or after it. Which of
// "ready" and the wait a frame written from another thread gets depends on the race, so each case
// allows exactly those two.
using Wait = FramePickup::Wait;

// Reads one request frame with `spin` while another thread writes it; the pickup.
std::optional<FramePickup> PickupOfARaceWithTheWriter(StepMemory& reader, int reader_fd, StepMemory& writer,
                                                      int writer_fd, const SpinWindow& spin) {
  auto read = std::async(std::launch::async, [&] {
    uint32_t word = 0;
    std::string got;
    std::optional<FramePickup> pickup;
    const absl::Status s = reader.Read(Side::kServer, reader_fd, absl::Now() + absl::Seconds(30), &word, &got, spin,
                                       &pickup);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(got, "raced");
    return pickup;
  });
  EXPECT_TRUE(writer.Write(Side::kClient, writer_fd, 1, "raced").ok());
  return read.get();
}

TEST_F(MemoryPair, SaysHowEachFrameWasWaitedFor) {
  uint32_t word = 0;
  std::string got;
  std::optional<FramePickup> pickup;
  ASSERT_TRUE(client_->Write(Side::kClient, client_fd(), 1, "early").ok());
  ASSERT_TRUE(server_->Read(Side::kServer, server_fd(), absl::Now() + absl::Seconds(10), &word, &got, SpinWindow{},
                            &pickup)
                  .ok());
  ASSERT_TRUE(pickup.has_value());
  EXPECT_EQ(pickup->wait, Wait::kReady);
  EXPECT_GE(pickup->latency, absl::ZeroDuration());

  const absl::Time now = absl::Now();
  const struct {
    SpinWindow spin;
    Wait waiting;
  } cases[] = {
      {SpinWindow{now - absl::Hours(1), now + absl::Hours(1)}, Wait::kSpinning},
      {SpinWindow{now + absl::Hours(1), now + absl::Hours(2)}, Wait::kAsleepBeforeWindow},
      {SpinWindow{}, Wait::kAsleepBeforeWindow},  // no window at all
      {SpinWindow{now - absl::Hours(2), now - absl::Hours(1)}, Wait::kAsleepAfterWindow},
      // A window of two stretches (RequestSpin): polled inside the later one, asleep between
      // them, and after both.
      {SpinWindow{now - absl::Hours(2), now - absl::Hours(1), now - absl::Hours(1), now + absl::Hours(1)},
       Wait::kSpinning},
      {SpinWindow{now - absl::Hours(2), now - absl::Hours(1), now + absl::Hours(1), now + absl::Hours(2)},
       Wait::kAsleepBeforeWindow},
      {SpinWindow{now - absl::Hours(3), now - absl::Hours(2), now - absl::Hours(2), now - absl::Hours(1)},
       Wait::kAsleepAfterWindow},
  };
  for (const auto& c : cases) {
    for (int i = 0; i < 10; ++i) {
      const std::optional<FramePickup> raced =
          PickupOfARaceWithTheWriter(*server_, server_fd(), *client_, client_fd(), c.spin);
      ASSERT_TRUE(raced.has_value());
      EXPECT_TRUE(raced->wait == Wait::kReady || raced->wait == c.waiting)
          << WaitName(raced->wait) << " where " << WaitName(c.waiting) << " was expected";
      EXPECT_GE(raced->latency, absl::ZeroDuration());
    }
  }
}

TEST_F(MemoryPair, AFrameFromAWriterThatLeftNoTimeHasNoPickup) {
  // A writer that predates the stamp leaves the header's publishing time at 0 (step_memory.h:
  // the i64 after the request header's four u32).
  void* raw = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, server_->fd(), 0);
  ASSERT_NE(raw, MAP_FAILED);
  auto* request_header = reinterpret_cast<std::atomic<uint32_t>*>(static_cast<char*>(raw) + 64);
  auto* published_at = reinterpret_cast<std::atomic<int64_t>*>(static_cast<char*>(raw) + 64 + 16);
  published_at->store(0);
  request_header[2].store(9);  // word
  request_header[3].store(0);  // bytes
  request_header[0].store(1);  // published
  uint32_t word = 0;
  std::string got;
  std::optional<FramePickup> pickup = FramePickup{};
  ASSERT_TRUE(server_->Read(Side::kServer, server_fd(), absl::Now() + absl::Seconds(10), &word, &got, SpinWindow{},
                            &pickup)
                  .ok());
  EXPECT_EQ(word, 9u);
  EXPECT_FALSE(pickup.has_value());
  munmap(raw, 4096);
}

// A frame on the socket (no memory) has no publishing time either.
TEST(StepMemoryTest, AFrameOnTheSocketHasNoPickup) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ASSERT_TRUE(WriteConnectionFrame(nullptr, Side::kClient, fds[0], 3, "on the socket").ok());
  uint32_t word = 0;
  std::string got;
  std::optional<FramePickup> pickup = FramePickup{};
  ASSERT_TRUE(ReadConnectionFrame(nullptr, Side::kServer, fds[1], absl::Now() + absl::Seconds(10), &word, &got,
                                  SpinWindow{}, &pickup)
                  .ok());
  EXPECT_EQ(got, "on the socket");
  EXPECT_FALSE(pickup.has_value());
  close(fds[0]);
  close(fds[1]);
}

// A peer can write anything into the memory: a size past the payload room, or a count that
// skips frames, is refused before any payload is copied (the layout: step_memory.h).
TEST_F(MemoryPair, RefusesAFrameSizeOrCountThatCannotBeOurPeers) {
  void* raw = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, server_->fd(), 0);
  ASSERT_NE(raw, MAP_FAILED);
  auto* request_header = reinterpret_cast<std::atomic<uint32_t>*>(static_cast<char*>(raw) + 64);
  // {published, reader_asleep, word, bytes}
  request_header[3].store(kMaxStepPayloadBytes + 1);
  request_header[0].store(1);
  uint32_t word = 0;
  std::string got;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  EXPECT_TRUE(absl::IsInvalidArgument(server_->Read(Side::kServer, server_fd(), deadline, &word, &got)));
  EXPECT_TRUE(got.empty());

  auto* answer_header = reinterpret_cast<std::atomic<uint32_t>*>(static_cast<char*>(raw) + 128);
  answer_header[3].store(4);
  answer_header[0].store(2);  // two frames at once: calls alternate, so never ours
  EXPECT_TRUE(absl::IsInvalidArgument(client_->Read(Side::kClient, client_fd(), deadline, &word, &got)));
  munmap(raw, 4096);
}

TEST(StepMemoryTest, MapRefusesMemoryThatIsNotAStepMemorys) {
  const int small = memfd_create("not-step-memory", MFD_CLOEXEC);
  ASSERT_GE(small, 0);
  ASSERT_EQ(ftruncate(small, 4096), 0);
  EXPECT_TRUE(absl::IsInvalidArgument(StepMemory::Map(small).status()));  // closes it

  absl::StatusOr<std::unique_ptr<StepMemory>> real = StepMemory::Create();
  ASSERT_TRUE(real.ok()) << real.status();
  const int copy = dup((*real)->fd());
  ASSERT_GE(copy, 0);
  // Same size, wrong header.
  void* base = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, copy, 0);
  ASSERT_NE(base, MAP_FAILED);
  static_cast<char*>(base)[0] ^= 0x5a;
  munmap(base, 4096);
  EXPECT_TRUE(absl::IsInvalidArgument(StepMemory::Map(copy).status()));
}

// A worker that predates the memory answers its request as any method it does not serve.
TEST(StepMemoryTest, AWorkerWithoutItLeavesTheConnectionOnTheSocket) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  auto opened = std::async(std::launch::async, [&] { return OpenStepMemory(fds[0], absl::Now() + absl::Seconds(10)); });
  uint32_t word = 0;
  std::string payload;
  ASSERT_TRUE(ReadStepFrame(fds[1], absl::Now() + absl::Seconds(10), &word, &payload).ok());
  ASSERT_TRUE(WriteStepFrame(fds[1], static_cast<uint32_t>(absl::StatusCode::kUnimplemented), "not served").ok());
  absl::StatusOr<std::unique_ptr<StepMemory>> memory = opened.get();
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(*memory, nullptr);
  // The next frame on the socket is read as one.
  ASSERT_TRUE(WriteStepFrame(fds[1], 0, "still framed").ok());
  ASSERT_TRUE(ReadStepFrame(fds[0], absl::Now() + absl::Seconds(10), &word, &payload).ok());
  EXPECT_EQ(payload, "still framed");
  close(fds[0]);
  close(fds[1]);
}

// Answers every request with "echo:" + its bytes.
absl::StatusOr<std::string> EchoAnyMethod(StepMethod, const std::string& request, std::function<void()>*) {
  return "echo:" + request;
}

// Through the server and client: a client that asks gets the memory (and the same answers); one
// that does not stays on the socket; both at once on one server.
TEST(StepMemoryTest, ClientsThatAskUseItAndOthersDoNot) {
  ScopedTempDir dir("step_memory_");
  const std::string path = dir.path() + "/w.sock.step";
  auto server =
      StepSocketServer::Start(path, EchoAnyMethod, /*max_connections=*/4, absl::Microseconds(300));
  ASSERT_TRUE(server.ok()) << server.status();
  StepSocketClient with_memory(path, absl::Microseconds(300), /*shared_memory=*/true);
  StepSocketClient without(path, absl::Microseconds(300), /*shared_memory=*/false);
  for (int i = 0; i < 20; ++i) {
    const std::string request = i % 5 == 0 ? Binary(100000 + i) : std::to_string(i);
    EXPECT_EQ(*with_memory.Call(StepMethod::kVerify, request, absl::Seconds(10)), "echo:" + request);
    EXPECT_EQ(*without.Call(StepMethod::kVerify, request, absl::Seconds(10)), "echo:" + request);
  }
  EXPECT_TRUE(with_memory.UsesSharedMemory());
  EXPECT_FALSE(without.UsesSharedMemory());
  // A second request for memory on a connection that has it is refused, through the memory.
  EXPECT_TRUE(absl::IsFailedPrecondition(with_memory.Call(StepMethod::kOpenMemory, "", absl::Seconds(10)).status()));
  EXPECT_EQ(*with_memory.Call(StepMethod::kVerify, "after", absl::Seconds(10)), "echo:after");
  (*server)->Stop();
  bool sent = false;
  EXPECT_TRUE(absl::IsUnavailable(with_memory.Call(StepMethod::kVerify, "late", absl::Seconds(10), &sent).status()));
}

// The server hears how each request through the memory was waited for, and the client each
// answer, with the method of the call; a connection on the socket reports none.
TEST(StepMemoryTest, ServerAndClientReportEachPickupWithItsMethod) {
  ScopedTempDir dir("step_memory_");
  const std::string path = dir.path() + "/w.sock.step";
  std::mutex mu;
  std::vector<StepMethod> requests, answers;
  auto record_into = [&mu](std::vector<StepMethod>* methods) {
    return [&mu, methods](StepMethod method, const FramePickup& pickup) {
      EXPECT_GE(pickup.latency, absl::ZeroDuration());
      std::lock_guard<std::mutex> lock(mu);
      methods->push_back(method);
    };
  };
  auto server = StepSocketServer::Start(path, EchoAnyMethod, /*max_connections=*/4, absl::Microseconds(300),
                                        record_into(&requests));
  ASSERT_TRUE(server.ok()) << server.status();
  StepSocketClient with_memory(path, absl::Microseconds(300), /*shared_memory=*/true);
  with_memory.set_pickup_observer(record_into(&answers));
  StepSocketClient without(path, absl::Microseconds(300), /*shared_memory=*/false);
  without.set_pickup_observer(record_into(&answers));
  const StepMethod methods[] = {StepMethod::kVerifyCompact, StepMethod::kProposeCompact, StepMethod::kRelease};
  for (StepMethod method : methods) {
    EXPECT_EQ(*with_memory.Call(method, "m", absl::Seconds(10)), "echo:m");
    EXPECT_EQ(*without.Call(method, "s", absl::Seconds(10)), "echo:s");
  }
  (*server)->Stop();
  std::lock_guard<std::mutex> lock(mu);
  // The memory is asked for on the socket, before any frame goes through it: not a pickup.
  EXPECT_EQ(requests, std::vector<StepMethod>(std::begin(methods), std::end(methods)));
  EXPECT_EQ(answers, std::vector<StepMethod>(std::begin(methods), std::end(methods)));
  EXPECT_EQ(PickupMethodName(StepMethod::kVerifyCompact), "verify");
  EXPECT_EQ(PickupMethodName(StepMethod::kPropose), "propose");
  EXPECT_EQ(PickupMethodName(StepMethod::kRelease), "other");
}

// A call that sleeps for its answer (AnswerWait::kSleep, a draft made ahead beside a verify
// call) never polls for it, even inside the window its method's calls poll in; the calls that
// poll still do afterwards.
TEST(StepMemoryTest, ACallThatSleepsNeverPollsForItsAnswer) {
  ScopedTempDir dir("step_memory_");
  const std::string path = dir.path() + "/w.sock.step";
  // A worker that computes for 2 ms: a call looks for its answer before it comes.
  auto computing = [](StepMethod method, const std::string& request, std::function<void()>* after_sent) {
    absl::SleepFor(absl::Milliseconds(2));
    return EchoAnyMethod(method, request, after_sent);
  };
  auto server = StepSocketServer::Start(path, computing, /*max_connections=*/4, absl::ZeroDuration());
  ASSERT_TRUE(server.ok()) << server.status();
  // A window a second wide each way: every answer a polling call waits for comes inside it.
  StepSocketClient client(path, absl::Seconds(1), /*shared_memory=*/true);
  std::vector<FramePickup::Wait> waits;
  client.set_pickup_observer([&waits](StepMethod, const FramePickup& pickup) { waits.push_back(pickup.wait); });
  auto call = [&client](AnswerWait wait) {
    return client.Call(StepMethod::kProposeCompact, "d", absl::Seconds(10), nullptr, nullptr, wait);
  };
  auto count = [&waits](FramePickup::Wait wait) { return std::count(waits.begin(), waits.end(), wait); };
  for (int i = 0; i < 10; ++i) ASSERT_EQ(*call(AnswerWait::kPollWhenDue), "echo:d");
  EXPECT_GT(count(FramePickup::Wait::kSpinning), 0);
  waits.clear();
  for (int i = 0; i < 10; ++i) ASSERT_EQ(*call(AnswerWait::kSleep), "echo:d");
  ASSERT_EQ(waits.size(), 10u);
  EXPECT_EQ(count(FramePickup::Wait::kSpinning), 0);
  waits.clear();
  for (int i = 0; i < 10; ++i) ASSERT_EQ(*call(AnswerWait::kPollWhenDue), "echo:d");
  EXPECT_GT(count(FramePickup::Wait::kSpinning), 0);
  (*server)->Stop();
}

}  // namespace
}  // namespace splitspec::rpc
