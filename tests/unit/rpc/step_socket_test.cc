// Step socket: frame encoding, the server's connection threads, the client's error handling
// (a late answer never read as the next call's), and the worker clients sending Verify and
// Propose over it while other calls stay on gRPC.
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/un.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/step_handler.h"
#include "common/rpc/step_socket_client.h"
#include "common/rpc/step_socket_server.h"
#include "common/rpc/step_socket_wire.h"
#include "common/rpc/step_codec.h"
#include "common/rpc/worker_clients.h"
#include "grpc/health/v1/health.pb.h"
#include "gtest/gtest.h"
#include "tests/unit/rpc/step_echo.h"
#include "tests/support/scoped_temp_dir.h"

namespace splitspec::rpc {
namespace {

using ::splitspec::testing::ScopedTempDir;

TEST(StepSocketPathTest, SitsBesideTheUnixSocketAddress) {
  EXPECT_EQ(StepSocketPath("unix:///run/splitspec/verifier.sock"), "/run/splitspec/verifier.sock.step");
  EXPECT_EQ(StepSocketPath("unix:relative.sock"), "relative.sock.step");
  EXPECT_EQ(StepSocketPath("127.0.0.1:50051"), "");
  EXPECT_EQ(StepSocketPath("unix:"), "");
}

class FramePair : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  int fds_[2] = {-1, -1};
};

TEST_F(FramePair, RoundTripsWordAndPayloadIncludingEmptyAndBinary) {
  const std::string binary("a\0b\xff", 4);
  for (const std::string& payload : {std::string(), binary, std::string(1 << 20, 'x')}) {
    // A 1 MiB frame does not fit the socket buffer: written from another thread.
    std::thread writer([&] { ASSERT_TRUE(WriteStepFrame(fds_[0], 7, payload).ok()); });
    uint32_t word = 0;
    std::string got;
    ASSERT_TRUE(ReadStepFrame(fds_[1], absl::InfiniteFuture(), &word, &got).ok());
    writer.join();
    EXPECT_EQ(word, 7u);
    EXPECT_EQ(got, payload);
  }
}

TEST_F(FramePair, RefusesBytesThatAreNotAFrameAndOversizedPayloads) {
  const uint32_t bad_magic[3] = {0x12345678, 1, 0};
  ASSERT_EQ(write(fds_[0], bad_magic, sizeof(bad_magic)), static_cast<ssize_t>(sizeof(bad_magic)));
  uint32_t word;
  std::string payload;
  EXPECT_TRUE(absl::IsInvalidArgument(ReadStepFrame(fds_[1], absl::InfiniteFuture(), &word, &payload)));
  const uint32_t too_big[3] = {kStepFrameMagic, 1, kMaxStepPayloadBytes + 1};
  ASSERT_EQ(write(fds_[0], too_big, sizeof(too_big)), static_cast<ssize_t>(sizeof(too_big)));
  EXPECT_TRUE(absl::IsInvalidArgument(ReadStepFrame(fds_[1], absl::InfiniteFuture(), &word, &payload)));
  EXPECT_TRUE(absl::IsResourceExhausted(WriteStepFrame(fds_[0], 1, std::string(kMaxStepPayloadBytes + 1, 'x'))));
}

TEST_F(FramePair, ReportsAClosedPeerAndAPassedDeadline) {
  uint32_t word;
  std::string payload;
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      ReadStepFrame(fds_[1], absl::Now() + absl::Milliseconds(20), &word, &payload)));
  // Half a header, then the peer goes away.
  const uint32_t half = kStepFrameMagic;
  ASSERT_EQ(write(fds_[0], &half, sizeof(half)), static_cast<ssize_t>(sizeof(half)));
  close(fds_[0]);
  fds_[0] = -1;
  EXPECT_TRUE(absl::IsUnavailable(ReadStepFrame(fds_[1], absl::InfiniteFuture(), &word, &payload)));
  EXPECT_TRUE(absl::IsUnavailable(WriteStepFrame(fds_[1], 1, "x")));
}

TEST_F(FramePair, ReadsAFrameWhetherItComesBeforeInsideOrAfterTheSpinWindow) {
  const absl::Time now = absl::Now();
  const SpinWindow windows[] = {
      {now - absl::Seconds(10), now + absl::Seconds(10)},     // polling from the start
      {now + absl::Seconds(3600), now + absl::Seconds(3601)},  // the frame comes before it
      {now - absl::Seconds(2), now - absl::Seconds(1)},        // over already: sleeps
      // Two stretches (RequestSpin): polling in the later one; asleep between the two.
      {now - absl::Seconds(2), now - absl::Seconds(1), now - absl::Seconds(1), now + absl::Seconds(10)},
      {now - absl::Seconds(2), now - absl::Seconds(1), now + absl::Seconds(3600), now + absl::Seconds(3601)},
  };
  for (const SpinWindow& window : windows) {
    std::thread writer([&] { ASSERT_TRUE(WriteStepFrame(fds_[0], 3, "answer").ok()); });
    uint32_t word = 0;
    std::string got;
    ASSERT_TRUE(ReadStepFrame(fds_[1], absl::InfiniteFuture(), &word, &got, window).ok());
    writer.join();
    EXPECT_EQ(word, 3u);
    EXPECT_EQ(got, "answer");
  }
}

TEST_F(FramePair, ADeadlineInsideTheSpinWindowEndsTheWait) {
  uint32_t word;
  std::string payload;
  const absl::Time now = absl::Now();
  // Polling until an hour from now must still stop at the deadline.
  EXPECT_TRUE(absl::IsDeadlineExceeded(ReadStepFrame(fds_[1], now + absl::Milliseconds(20), &word, &payload,
                                                     SpinWindow{now, now + absl::Hours(1)})));
  // And a window that starts after the deadline is never reached.
  EXPECT_TRUE(absl::IsDeadlineExceeded(ReadStepFrame(fds_[1], absl::Now() + absl::Milliseconds(20), &word,
                                                     &payload, SpinWindow{now + absl::Hours(1), now + absl::Hours(2)})));
  // Nor does a later stretch outlast it.
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      ReadStepFrame(fds_[1], absl::Now() + absl::Milliseconds(20), &word, &payload,
                    SpinWindow{now - absl::Hours(2), now - absl::Hours(1), now, now + absl::Hours(1)})));
}

// The same calls whether both ends sleep between frames, poll around them (spin_window.h), or
// poll all the time, and whether the frames go through the socket or shared memory
// (step_memory.h): Stop must end a connection thread that is polling, too.
class StepSocketServerSpinTest : public ::testing::TestWithParam<std::tuple<absl::Duration, bool>> {
 protected:
  absl::Duration margin() const { return std::get<0>(GetParam()); }
  bool shared_memory() const { return std::get<1>(GetParam()); }
};

INSTANTIATE_TEST_SUITE_P(SpinMarginsAndTransports, StepSocketServerSpinTest,
                         ::testing::Combine(::testing::Values(absl::ZeroDuration(), absl::Microseconds(300),
                                                              absl::Seconds(60)),
                                            ::testing::Bool()));

TEST_P(StepSocketServerSpinTest, AnswersCallsInOrderAndPassesErrorsBackOnALiveConnection) {
  ScopedTempDir dir("step_socket_");
  const std::string path = dir.path() + "/w.sock.step";
  auto server = StepSocketServer::Start(path, Echo, /*max_connections=*/16, margin());
  ASSERT_TRUE(server.ok()) << server.status();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the socket must be its owner's only";

  StepSocketClient client(path, margin(), shared_memory());
  ExpectEchoesAndErrors(client);
  EXPECT_EQ(client.UsesSharedMemory(), shared_memory());
  bool sent = false;

  (*server)->Stop();
  EXPECT_NE(stat(path.c_str(), &st), 0) << "Stop removes the socket file";
  // The open connection was closed by Stop: the call was sent and found it gone.
  absl::StatusOr<std::string> after = client.Call(StepMethod::kVerify, "late", absl::Seconds(10), &sent);
  EXPECT_TRUE(absl::IsUnavailable(after.status())) << after.status();
}

TEST(StepSocketServerTest, ServesSeveralClientsAtOnceUpToItsLimit) {
  ScopedTempDir dir("step_socket_");
  const std::string path = dir.path() + "/w.sock.step";
  // Each call waits for a second one to be in its handler: both are served at the same time
  // or neither returns.
  std::promise<void> first_in, second_in;
  std::shared_future<void> first = first_in.get_future().share(), second = second_in.get_future().share();
  std::atomic<int> calls{0};
  auto server = StepSocketServer::Start(path, [&](StepMethod, const std::string& request,
                                                 std::function<void()>*) -> absl::StatusOr<std::string> {
    if (calls.fetch_add(1) == 0) {
      first_in.set_value();
      second.wait();
    } else {
      second_in.set_value();
      first.wait();
    }
    return request;
  }, /*max_connections=*/2);
  ASSERT_TRUE(server.ok()) << server.status();
  StepSocketClient a(path), b(path);
  auto call_a = std::async(std::launch::async, [&] { return a.Call(StepMethod::kVerify, "a", absl::Seconds(30)); });
  auto call_b = std::async(std::launch::async, [&] { return b.Call(StepMethod::kVerify, "b", absl::Seconds(30)); });
  EXPECT_EQ(*call_a.get(), "a");
  EXPECT_EQ(*call_b.get(), "b");
  // A third connection is over the limit: closed at once, its call fails instead of hanging.
  StepSocketClient c(path);
  EXPECT_TRUE(absl::IsUnavailable(c.Call(StepMethod::kVerify, "c", absl::Seconds(30)).status()));
}

TEST(StepSocketServerTest, ReplacesAStaleSocketButNotAnotherFile) {
  ScopedTempDir dir("step_socket_");
  const std::string path = dir.path() + "/w.sock.step";
  {
    // A socket file left behind (bound, never unlinked).
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    close(fd);
  }
  auto server = StepSocketServer::Start(path, Echo);
  ASSERT_TRUE(server.ok()) << server.status();
  StepSocketClient client(path);
  EXPECT_EQ(*client.Call(StepMethod::kVerify, "x", absl::Seconds(10)), "echo:x");

  const std::string file = dir.path() + "/not-a-socket";
  std::ofstream(file) << "data";
  EXPECT_TRUE(absl::IsAlreadyExists(StepSocketServer::Start(file, Echo).status()));
  EXPECT_FALSE(StepSocketServer::Start(std::string(200, 'p'), Echo).ok()) << "longer than sun_path";
}

TEST(StepSocketClientTest, SaysNothingWasSentWhenNoServerListens) {
  ScopedTempDir dir("step_socket_");
  StepSocketClient client(dir.path() + "/absent.step");
  bool sent = true;
  EXPECT_TRUE(absl::IsUnavailable(client.Call(StepMethod::kVerify, "x", absl::Seconds(1), &sent).status()));
  EXPECT_FALSE(sent);
}

TEST(StepSocketClientTest, ATimedOutAnswerIsNeverReadAsTheNextCalls) {
  ScopedTempDir dir("step_socket_");
  const std::string path = dir.path() + "/w.sock.step";
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto server = StepSocketServer::Start(path, [&](StepMethod, const std::string& request,
                                                 std::function<void()>*) -> absl::StatusOr<std::string> {
    if (request == "slow") released.wait();
    return "answer to " + request;
  });
  ASSERT_TRUE(server.ok()) << server.status();
  StepSocketClient client(path);
  bool sent = false;
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      client.Call(StepMethod::kVerify, "slow", absl::Milliseconds(50), &sent).status()));
  EXPECT_TRUE(sent);
  release.set_value();  // the slow answer now goes to the connection the client dropped
  // The next call connects again (after the one-second pause a failed connect would take, it
  // is not one here: the old connection was fine, the client closed it) and gets its own answer.
  absl::StatusOr<std::string> next = client.Call(StepMethod::kVerify, "next", absl::Seconds(10));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, "answer to next");
}

// Work a handler leaves for after its answer runs once the answer is on its way: the client
// reads the answer while that work still waits for the client to say it has (were the work run
// first, it would wait its whole minute and the call would time out), and it runs before the
// connection's next request is read.
TEST(StepSocketServerTest, WorkLeftForAfterTheAnswerRunsOnceTheAnswerIsSent) {
  ScopedTempDir dir("step_socket_");
  const std::string path = dir.path() + "/w.sock.step";
  std::promise<void> answer_read;
  std::shared_future<void> answer_read_future = answer_read.get_future().share();
  std::atomic<int> after_sent_runs{0};
  std::atomic<bool> waited_for_the_client{false};
  auto server = StepSocketServer::Start(
      path,
      [&](StepMethod method, const std::string& request, std::function<void()>* after_sent) {
        if (request == "first") {
          *after_sent = [&] {
            waited_for_the_client =
                answer_read_future.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
            ++after_sent_runs;
          };
        }
        return Echo(method, request, after_sent);
      },
      /*max_connections=*/16, absl::ZeroDuration());
  ASSERT_TRUE(server.ok()) << server.status();
  StepSocketClient client(path, absl::ZeroDuration());
  absl::StatusOr<std::string> first = client.Call(StepMethod::kVerify, "first", absl::Seconds(20));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, "echo:first");
  answer_read.set_value();
  absl::StatusOr<std::string> second = client.Call(StepMethod::kVerify, "second", absl::Seconds(20));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(after_sent_runs.load(), 1);
  EXPECT_TRUE(waited_for_the_client.load());
  (*server)->Stop();
}

TEST(UnaryStepHandlerTest, ParsesCallsAndSerialisesLikeTheGrpcMethod) {
  using grpc::health::v1::HealthCheckRequest;
  using grpc::health::v1::HealthCheckResponse;
  int recorded = 0;
  StepHandler handler = UnaryStepHandler<HealthCheckRequest, HealthCheckResponse>(
      StepMethod::kVerify,
      [&recorded](const HealthCheckRequest* request, HealthCheckResponse* response, std::function<void()>* after_sent) {
        if (request->service() == "missing") return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
        response->set_status(HealthCheckResponse::SERVING);
        *after_sent = [&recorded] { ++recorded; };
        return grpc::Status::OK;
      });
  HealthCheckRequest request;
  request.set_service("splitspec.v1.Verifier");
  std::function<void()> after_sent;
  absl::StatusOr<std::string> bytes = handler(StepMethod::kVerify, request.SerializeAsString(), &after_sent);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  HealthCheckResponse response;
  ASSERT_TRUE(response.ParseFromString(*bytes));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  // The method's work for after the answer reaches the server, which runs it.
  ASSERT_TRUE(after_sent);
  EXPECT_EQ(recorded, 0);
  after_sent();
  EXPECT_EQ(recorded, 1);
  after_sent = nullptr;

  request.set_service("missing");
  absl::StatusOr<std::string> missing = handler(StepMethod::kVerify, request.SerializeAsString(), &after_sent);
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_EQ(missing.status().message(), "unknown service");
  EXPECT_TRUE(absl::IsUnimplemented(handler(StepMethod::kPropose, request.SerializeAsString(), &after_sent).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(handler(StepMethod::kVerify, std::string("\xff\xff\xff", 3), &after_sent).status()));
}

// A worker's step handler for the worker clients' tests: Verify in protobuf (kVerify) and, when
// `compact`, in the compact encoding too; Propose; UNIMPLEMENTED for anything else, as the
// services' handlers answer. Counts the calls by method.
struct FakeWorker {
  bool compact = true;
  bool serves_release = true;
  std::atomic<int> proto_verifies{0}, compact_verifies{0}, compact_refusals{0}, proto_proposes{0}, compact_proposes{0};
  std::atomic<int> release_refusals{0};
  std::mutex mu;
  std::vector<spec::RequestId> released;  // guarded by mu

  absl::StatusOr<std::string> Handle(StepMethod method, const std::string& bytes) {
    switch (method) {
      case StepMethod::kVerifyCompact: {
        if (!compact) {
          ++compact_refusals;
          return absl::UnimplementedError("step socket method 3 is not served here");
        }
        ++compact_verifies;
        absl::StatusOr<std::vector<spec::VerifyItem>> items = DecodeVerifyItems(bytes);
        if (!items.ok()) return items.status();
        spec::VerifyResponse response;
        for (const spec::VerifyItem& item : *items) {
          spec::VerifyResult& result = response.results.emplace_back();
          result.id = item.id;
          result.tokens = {42, static_cast<int32_t>(item.draft.tokens.size())};
          result.accept_length = 1;
        }
        response.compute_seconds = 0.25;
        return EncodeVerifyResponse(response);
      }
      case StepMethod::kVerify: {
        ++proto_verifies;
        v1::VerifyRequest request;
        if (!request.ParseFromString(bytes)) return absl::InvalidArgumentError("bad request");
        v1::VerifyResponse response;
        for (const auto& item : request.items()) {
          auto* result = response.add_results();
          result->set_request_id(item.request_id());
          result->set_accept_length(1);
          result->add_tokens(42);
          result->add_tokens(item.draft().tokens_size());
        }
        response.set_compute_seconds(0.25);
        return response.SerializeAsString();
      }
      case StepMethod::kProposeCompact: {
        if (!compact) {
          ++compact_refusals;
          return absl::UnimplementedError("step socket method 4 is not served here");
        }
        ++compact_proposes;
        absl::StatusOr<std::vector<spec::ProposeItem>> items = DecodeProposeItems(bytes);
        if (!items.ok()) return items.status();
        spec::ProposeResponse response;
        for (const spec::ProposeItem& item : *items) {
          spec::ProposeResult& result = response.results.emplace_back();
          result.id = item.id;
          result.draft.tokens.assign(static_cast<size_t>(item.shape.depth), 7);
        }
        return EncodeProposeResponse(response);
      }
      case StepMethod::kPropose: {
        ++proto_proposes;
        v1::ProposeRequest request;
        if (!request.ParseFromString(bytes)) return absl::InvalidArgumentError("bad request");
        v1::ProposeResponse response;
        for (const auto& item : request.items()) {
          auto* result = response.add_results();
          result->set_request_id(item.request_id());
          for (int i = 0; i < item.shape().depth(); ++i) result->mutable_draft()->add_tokens(7);
        }
        return response.SerializeAsString();
      }
      case StepMethod::kRelease: {
        if (!serves_release) {
          ++release_refusals;
          return absl::UnimplementedError("step socket method 6 is not served here");
        }
        v1::ReleaseRequest request;
        if (!request.ParseFromString(bytes)) return absl::InvalidArgumentError("bad request");
        std::lock_guard<std::mutex> lock(mu);
        released.insert(released.end(), request.request_ids().begin(), request.request_ids().end());
        v1::ReleaseResponse response;
        response.set_released(request.request_ids_size());
        return response.SerializeAsString();
      }
      default:
        break;
    }
    return absl::UnimplementedError("not served here");
  }

  absl::StatusOr<std::unique_ptr<StepSocketServer>> Serve(const std::string& path) {
    return StepSocketServer::Start(path, [this](StepMethod method, const std::string& bytes,
                                                std::function<void()>*) { return Handle(method, bytes); });
  }
};

spec::VerifyItem ItemWithChain(spec::RequestId id) {
  spec::VerifyItem item;
  item.id = id;
  item.draft.tokens = {5, 9};
  item.draft.parents = {-1, 0};
  return item;
}

// A FakeWorker serving a step socket beside a gRPC address where no server listens, so that an
// answer proves a call took the socket.
class WorkerClientStepSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server = worker.Serve(path);
    ASSERT_TRUE(server.ok()) << server.status();
  }

  ScopedTempDir dir{"step_socket_"};
  const std::string grpc_address = "unix://" + dir.path() + "/nobody.sock";
  const std::string path = StepSocketPath(grpc_address);
  FakeWorker worker;
  absl::StatusOr<std::unique_ptr<StepSocketServer>> server;
};

// The worker clients: Verify and Propose take the step socket when one is set and reachable
// (here the gRPC channel leads nowhere, so an answer proves it), and gRPC otherwise. Verify goes
// in the compact encoding.
TEST_F(WorkerClientStepSocketTest, VerifyAndProposeUseTheSocketAndFallBackToGrpcWithoutIt) {
  VerifierClient verifier(MakeChannel(grpc_address), absl::Seconds(2));
  verifier.UseStepSocket(path);
  absl::StatusOr<spec::VerifyResponse> verified = verifier.Verify({ItemWithChain(7)});
  ASSERT_TRUE(verified.ok()) << verified.status();
  ASSERT_EQ(verified->results.size(), 1u);
  EXPECT_EQ(verified->results[0].id, 7u);
  EXPECT_EQ(verified->results[0].tokens, (std::vector<int32_t>{42, 2}));  // the draft reached the worker
  EXPECT_DOUBLE_EQ(verified->compute_seconds, 0.25);
  EXPECT_EQ(worker.compact_verifies.load(), 1);
  EXPECT_EQ(worker.proto_verifies.load(), 0);

  DrafterClient drafter(MakeChannel(grpc_address), absl::Seconds(2));
  drafter.UseStepSocket(path);
  spec::ProposeItem propose;
  propose.id = 9;
  propose.shape.depth = 3;
  absl::StatusOr<spec::ProposeResponse> proposed = drafter.Propose({propose});
  ASSERT_TRUE(proposed.ok()) << proposed.status();
  ASSERT_EQ(proposed->results.size(), 1u);
  EXPECT_EQ(proposed->results[0].id, 9u);
  EXPECT_EQ(proposed->results[0].draft.tokens, (std::vector<int32_t>{7, 7, 7}));  // the shape reached the worker
  EXPECT_EQ(worker.compact_proposes.load(), 1);
  EXPECT_EQ(worker.proto_proposes.load(), 0);

  // Without the socket the call goes to gRPC, which finds no server there.
  (*server)->Stop();
  VerifierClient fallback(MakeChannel(grpc_address), absl::Seconds(2));
  fallback.UseStepSocket(path);
  absl::StatusOr<spec::VerifyResponse> over_grpc = fallback.Verify({ItemWithChain(7)});
  EXPECT_FALSE(over_grpc.ok());
  EXPECT_TRUE(absl::IsUnavailable(over_grpc.status()) || absl::IsDeadlineExceeded(over_grpc.status()))
      << over_grpc.status();
}

// A worker that predates the compact encoding answers it UNIMPLEMENTED: that call is sent again
// in protobuf on the same socket (the work beside a Verify runs once), and later calls go in
// protobuf at once.
TEST_F(WorkerClientStepSocketTest, VerifyFallsBackToProtobufForAWorkerWithoutTheCompactEncoding) {
  worker.compact = false;
  VerifierClient verifier(MakeChannel(grpc_address), absl::Seconds(2));
  verifier.UseStepSocket(path);
  for (int call = 0; call < 2; ++call) {
    int beside = 0;
    absl::StatusOr<spec::VerifyResponse> verified = verifier.Verify({ItemWithChain(3)}, [&beside] { ++beside; });
    ASSERT_TRUE(verified.ok()) << verified.status();
    ASSERT_EQ(verified->results.size(), 1u);
    EXPECT_EQ(verified->results[0].tokens, (std::vector<int32_t>{42, 2}));
    EXPECT_EQ(beside, 1) << "call " << call;
  }
  EXPECT_EQ(worker.proto_verifies.load(), 2);
  EXPECT_EQ(worker.compact_refusals.load(), 1);  // asked once only
  EXPECT_EQ(worker.compact_verifies.load(), 0);

  DrafterClient drafter(MakeChannel(grpc_address), absl::Seconds(2));
  drafter.UseStepSocket(path);
  spec::ProposeItem propose;
  propose.id = 9;
  propose.shape.depth = 2;
  for (int call = 0; call < 2; ++call) {
    absl::StatusOr<spec::ProposeResponse> proposed = drafter.Propose({propose});
    ASSERT_TRUE(proposed.ok()) << proposed.status();
    ASSERT_EQ(proposed->results.size(), 1u);
    EXPECT_EQ(proposed->results[0].draft.tokens, (std::vector<int32_t>{7, 7}));
  }
  EXPECT_EQ(worker.proto_proposes.load(), 2);
  EXPECT_EQ(worker.compact_refusals.load(), 2);  // once more, for Propose
  EXPECT_EQ(worker.compact_proposes.load(), 0);
}

// Release goes on the step socket too (the gRPC channel leads nowhere, so success proves it);
// a worker that does not serve it there answers UNIMPLEMENTED once, and that client's releases
// then go to gRPC.
TEST_F(WorkerClientStepSocketTest, ReleaseUsesTheSocketAndFallsBackToGrpcForAWorkerWithoutIt) {
  VerifierClient verifier(MakeChannel(grpc_address), absl::Seconds(2));
  verifier.UseStepSocket(path);
  DrafterClient drafter(MakeChannel(grpc_address), absl::Seconds(2));
  drafter.UseStepSocket(path);
  EXPECT_TRUE(verifier.Release({3, 4}).ok());
  EXPECT_TRUE(drafter.Release({5}).ok());
  {
    std::lock_guard<std::mutex> lock(worker.mu);
    EXPECT_EQ(worker.released, (std::vector<spec::RequestId>{3, 4, 5}));
  }

  worker.serves_release = false;
  for (int call = 0; call < 2; ++call) {
    const absl::Status over_grpc = verifier.Release({6});
    EXPECT_TRUE(absl::IsUnavailable(over_grpc) || absl::IsDeadlineExceeded(over_grpc)) << over_grpc;
  }
  EXPECT_EQ(worker.release_refusals.load(), 1);  // asked once only
  std::lock_guard<std::mutex> lock(worker.mu);
  EXPECT_EQ(worker.released.size(), 3u);
  (*server)->Stop();
}

TEST(WithUnaryMethodTest, ServesItsMethodAndPassesTheOthersOn) {
  using grpc::health::v1::HealthCheckRequest;
  using grpc::health::v1::HealthCheckResponse;
  StepHandler others = [](StepMethod method, const std::string& bytes, std::function<void()>*) {
    return absl::StatusOr<std::string>(absl::StrCat("others:", static_cast<uint32_t>(method), ":", bytes));
  };
  StepHandler handler = WithUnaryMethod<HealthCheckRequest, HealthCheckResponse>(
      StepMethod::kRelease, others, [](const HealthCheckRequest* request, HealthCheckResponse* response, auto*) {
        response->set_status(request->service() == "up" ? HealthCheckResponse::SERVING
                                                        : HealthCheckResponse::NOT_SERVING);
        return grpc::Status::OK;
      });
  HealthCheckRequest request;
  request.set_service("up");
  std::function<void()> after_sent;
  absl::StatusOr<std::string> served = handler(StepMethod::kRelease, request.SerializeAsString(), &after_sent);
  ASSERT_TRUE(served.ok()) << served.status();
  HealthCheckResponse response;
  ASSERT_TRUE(response.ParseFromString(*served));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  absl::StatusOr<std::string> passed = handler(StepMethod::kVerify, "x", &after_sent);
  ASSERT_TRUE(passed.ok()) << passed.status();
  EXPECT_EQ(*passed, "others:1:x");
  EXPECT_TRUE(absl::IsInvalidArgument(handler(StepMethod::kRelease, std::string("\xff\xff\xff", 3), &after_sent).status()));
}

}  // namespace
}  // namespace splitspec::rpc
