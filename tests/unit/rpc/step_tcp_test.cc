// Step sockets over TCP: addresses split, the server on a TCP port (frames on the socket, shared
// memory refused), the client finding its endpoint by a lookup and falling back when there is
// none, the lookup from a worker's GetInfo, and the gRPC server starting a step port beside a
// TCP address.
#include <unistd.h>

#include <atomic>
#include <string>
#include <utility>

#include "common/rpc/resolve.h"
#include "common/rpc/server.h"
#include "common/rpc/step_socket_client.h"
#include "common/rpc/step_socket_server.h"
#include "common/rpc/step_socket_wire.h"
#include "common/rpc/step_tcp.h"
#include "common/rpc/worker_clients.h"
#include "gtest/gtest.h"
#include "tests/unit/rpc/step_echo.h"

namespace splitspec::rpc {
namespace {

// The endpoint of a server on the loopback address: its port and its token.
TcpStepEndpointLookup LoopbackPort(int port, uint64_t token) {
  return [port, token]() -> absl::StatusOr<TcpStepEndpoint> { return TcpStepEndpoint{"127.0.0.1", port, token}; };
}
TcpStepEndpointLookup LoopbackPort(const StepSocketServer& server) { return LoopbackPort(server.port(), server.token()); }

TEST(SplitHostPortTest, SplitsNamesAddressesAndDnsTargets) {
  EXPECT_EQ(*SplitHostPort("verifier-0.verifier:50051"), std::make_pair(std::string("verifier-0.verifier"), 50051));
  EXPECT_EQ(*SplitHostPort("10.0.0.7:9"), std::make_pair(std::string("10.0.0.7"), 9));
  EXPECT_EQ(*SplitHostPort("[fd00::7]:50051"), std::make_pair(std::string("fd00::7"), 50051));
  EXPECT_EQ(*SplitHostPort("dns:///verifier:50051"), std::make_pair(std::string("verifier"), 50051));
  for (const char* bad : {"unix:///run/w.sock", "verifier", ":50051", "verifier:", "verifier:port", "verifier:70000"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(SplitHostPort(bad).status())) << bad;
  }
}

TEST(StepTcpTest, ServesCallsOnAPortWithTheFramesOnTheSocket) {
  auto server = StepSocketServer::StartTcp("127.0.0.1", 0, Echo);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  EXPECT_GT(port, 0);
  EXPECT_EQ((*server)->path(), "");

  StepSocketClient client(LoopbackPort(**server), "worker:50051");
  EXPECT_TRUE(client.OverTcp());
  ExpectEchoesAndErrors(client);
  EXPECT_FALSE(client.UsesSharedMemory());
  (*server)->Stop();
  bool sent = false;
  absl::StatusOr<std::string> after = client.Call(StepMethod::kVerify, "late", absl::Seconds(10), &sent);
  EXPECT_TRUE(absl::IsUnavailable(after.status())) << after.status();
}

// Shared memory travels as a descriptor, which TCP cannot carry: a client that asks anyway is
// refused and its connection goes on with frames on the socket.
TEST(StepTcpTest, AskingForSharedMemoryOverTcpIsRefusedAndTheConnectionStays) {
  auto server = StepSocketServer::StartTcp("127.0.0.1", 0, Echo);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<int> fd = ConnectTcp("127.0.0.1", (*server)->port(), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(fd.ok()) << fd.status();
  uint32_t word = 0;
  std::string payload;
  ASSERT_TRUE(WriteStepFrame(*fd, static_cast<uint32_t>(StepMethod::kOpenMemory), "").ok());
  ASSERT_TRUE(ReadStepFrame(*fd, absl::Now() + absl::Seconds(10), &word, &payload).ok());
  EXPECT_EQ(word, static_cast<uint32_t>(absl::StatusCode::kFailedPrecondition));
  ASSERT_TRUE(WriteStepFrame(*fd, static_cast<uint32_t>(StepMethod::kVerify), "x").ok());
  ASSERT_TRUE(ReadStepFrame(*fd, absl::Now() + absl::Seconds(10), &word, &payload).ok());
  EXPECT_EQ(word, static_cast<uint32_t>(absl::StatusCode::kOk));
  EXPECT_EQ(payload, "echo:x");
  close(*fd);
}

// A step port that answers for another worker than the one GetInfo spoke for (an address that
// balances connections over replicas) is not used: nothing is sent there, and the client does
// not try again at every call.
TEST(StepTcpTest, AStepPortThatAnswersForAnotherWorkerIsNotUsed) {
  auto server = StepSocketServer::StartTcp("127.0.0.1", 0, Echo);
  ASSERT_TRUE(server.ok()) << server.status();
  std::atomic<int> asked{0};
  StepSocketClient other(
      [&asked, port = (*server)->port(), token = (*server)->token()]() -> absl::StatusOr<TcpStepEndpoint> {
        ++asked;
        return TcpStepEndpoint{"127.0.0.1", port, token + 1};
      },
      "worker:50051");
  for (int call = 0; call < 2; ++call) {
    bool sent = true;
    EXPECT_TRUE(absl::IsUnavailable(other.Call(StepMethod::kVerify, "x", absl::Seconds(10), &sent).status()));
    EXPECT_FALSE(sent);
  }
  EXPECT_EQ(asked.load(), 1);
  EXPECT_FALSE(other.Connected());
  // The right token: the same port serves.
  StepSocketClient same(LoopbackPort(**server), "worker:50051");
  EXPECT_EQ(*same.Call(StepMethod::kVerify, "1", absl::Seconds(10)), "echo:1");
}

// No endpoint: nothing is sent (the caller goes to gRPC). A worker that says it has none is not
// asked again on the next call; a lookup that failed otherwise is retried after a second.
TEST(StepTcpTest, NothingIsSentWithoutAnEndpointAndAWorkerWithoutOneIsNotAskedAtEveryCall) {
  std::atomic<int> asked{0};
  StepSocketClient none(
      [&asked]() -> absl::StatusOr<TcpStepEndpoint> {
        ++asked;
        return absl::NotFoundError("the worker serves no step port");
      },
      "worker:50051");
  bool sent = true;
  EXPECT_TRUE(absl::IsUnavailable(none.Call(StepMethod::kVerify, "x", absl::Seconds(1), &sent).status()));
  EXPECT_FALSE(sent);
  sent = true;
  EXPECT_TRUE(absl::IsUnavailable(none.Call(StepMethod::kVerify, "x", absl::Seconds(1), &sent).status()));
  EXPECT_FALSE(sent);
  EXPECT_EQ(asked.load(), 1);

  // A port where nobody listens: refused at once, nothing sent.
  int free_port = 0;
  absl::StatusOr<int> listener = ListenTcp("127.0.0.1", 0, &free_port);
  ASSERT_TRUE(listener.ok()) << listener.status();
  close(*listener);
  StepSocketClient refused(LoopbackPort(free_port, 0), "worker:50051");
  sent = true;
  const absl::Time start = absl::Now();
  EXPECT_TRUE(absl::IsUnavailable(refused.Call(StepMethod::kVerify, "x", absl::Seconds(30), &sent).status()));
  EXPECT_FALSE(sent);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "a refused connect must not wait out the call's deadline";
}

// Whether the router runs its side work inside the verify call (VerifierClient::has_step_socket)
// follows the connection: a worker that serves no step port is called over gRPC, where that work
// must run on another thread, not before the call.
TEST(StepTcpTest, AVerifierWithoutAStepPortIsNotTakenForOneWithASocket) {
  auto server = StepSocketServer::StartTcp("127.0.0.1", 0, Echo);
  ASSERT_TRUE(server.ok()) << server.status();
  StepSocketClient client(LoopbackPort(**server), "worker:50051");
  EXPECT_FALSE(client.Connected());
  ASSERT_TRUE(client.Call(StepMethod::kVerify, "1", absl::Seconds(10)).ok());
  EXPECT_TRUE(client.Connected());
  (*server)->Stop();
  EXPECT_FALSE(client.Call(StepMethod::kVerify, "2", absl::Seconds(10)).ok());
  EXPECT_FALSE(client.Connected()) << "a broken connection is closed";

  VerifierClient verifier(MakeChannel("127.0.0.1:1"), absl::Seconds(2));
  verifier.UseTcpStepSocket(
      []() -> absl::StatusOr<TcpStepEndpoint> { return absl::NotFoundError("no step port"); },
      "127.0.0.1:1");
  EXPECT_FALSE(verifier.has_step_socket());
  EXPECT_FALSE(verifier.Verify({}).ok());  // over gRPC, where nobody listens
  EXPECT_FALSE(verifier.has_step_socket());
}

// The router's lookup: the port the worker reports, on the host the router dials.
TEST(StepTcpTest, TheEndpointIsTheDialledHostAndTheReportedPort) {
  spec::WorkerInfo info;
  info.step_port = 50061;
  info.step_token = 77;
  int calls = 0;
  auto get_info = [&]() -> absl::StatusOr<spec::WorkerInfo> {
    ++calls;
    return info;
  };
  absl::StatusOr<TcpStepEndpoint> endpoint = StepEndpointFromInfo("10.0.0.7:50051", get_info)();
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_EQ(endpoint->host, "10.0.0.7");
  EXPECT_EQ(endpoint->port, 50061);
  EXPECT_EQ(endpoint->token, 77u);
  EXPECT_EQ(StepEndpointFromInfo("[fd00::7]:50051", get_info)()->host, "fd00::7");

  info.step_port = 0;
  EXPECT_TRUE(absl::IsNotFound(StepEndpointFromInfo("10.0.0.7:50051", get_info)().status()));
  const int before = calls;
  EXPECT_TRUE(absl::IsNotFound(StepEndpointFromInfo("unix:///run/w.sock", get_info)().status()));
  EXPECT_EQ(calls, before) << "a Unix socket address has no TCP host: the worker is not asked";
  auto unreachable = []() -> absl::StatusOr<spec::WorkerInfo> { return absl::UnavailableError("down"); };
  EXPECT_TRUE(absl::IsUnavailable(StepEndpointFromInfo("10.0.0.7:50051", unreachable)().status()));
}

// The server bootstrap: a step port beside a TCP address, told to the service before the server
// reports healthy; none unless asked for; a step port beside a Unix socket is a mistake.
TEST(StepTcpTest, TheServerStartsAStepPortBesideATcpAddressOnlyWhenAskedTo) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  options.step_handler = Echo;
  options.step_port = 0;
  int told = 0;
  uint64_t told_token = 0;
  options.on_step_port = [&told, &told_token](int port, uint64_t token) {
    told = port;
    told_token = token;
  };
  v1::Verifier::Service unimplemented;  // a gRPC server needs a service
  auto server = Server::Start(options, {&unimplemented}, {});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_GT((*server)->step_port(), 0);
  EXPECT_EQ(told, (*server)->step_port());
  StepSocketClient client(LoopbackPort((*server)->step_port(), told_token), (*server)->address());
  EXPECT_EQ(*client.Call(StepMethod::kVerify, "1", absl::Seconds(10)), "echo:1");
  (*server)->Shutdown();

  options.step_port = -1;
  told = 0;
  auto without = Server::Start(options, {&unimplemented}, {});
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ((*without)->step_port(), 0);
  EXPECT_EQ(told, 0);
  (*without)->Shutdown();

  options.address = "unix:///tmp/splitspec-step-tcp-test.sock";
  options.step_port = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(Server::Start(options, {&unimplemented}, {}).status()));
}

}  // namespace
}  // namespace splitspec::rpc
