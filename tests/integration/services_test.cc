// End-to-end tests of splitspec-verifier, splitspec-drafter and splitspec-router as real
// processes on loopback: greedy outputs equal plain engine greedy generation for every policy
// and proposer, concurrent streams, cancellation releasing worker sessions, bad input, and a
// clean exit on SIGTERM.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/engine/tokenizer/tokenizer.h"
#include "common/rpc/resolve.h"
#include "common/rpc/worker_clients.h"
#include "splitspec/v1/router.grpc.pb.h"
#include "tests/integration/cluster.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec::testing {
namespace {

struct Generated {
  grpc::Status status;
  std::vector<int32_t> tokens;  // every token id streamed, in order
  std::string text;
  int messages = 0;
  v1::GenerateResponse final;
};

v1::GenerateRequest TokenRequest(const std::vector<int32_t>& prompt, int max_tokens, const std::string& pool = "") {
  v1::GenerateRequest request;
  request.mutable_tokens()->mutable_ids()->Add(prompt.begin(), prompt.end());
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);  // the reference decodes a fixed number of tokens
  request.set_drafter(pool);
  return request;
}

Generated Generate(const std::string& router, const v1::GenerateRequest& request) {
  auto stub = v1::Router::NewStub(rpc::MakeChannel(router));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  Generated out;
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    out.tokens.insert(out.tokens.end(), response.token_ids().begin(), response.token_ids().end());
    out.text += response.text();
    ++out.messages;
    out.final = response;
  }
  out.status = reader->Finish();
  return out;
}

// Polls a worker's live session count until it reaches `want` (what the test waits on is an
// observable state change in another process; the deadline only bounds a failure).
int32_t WaitForLiveSessions(const std::function<int32_t()>& live, int32_t want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int32_t now = live();
  while (now != want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    now = live();
  }
  return now;
}

const std::vector<int32_t> kVaried = {1, 17, 42, 99, 5, 300, 12, 480, 77};
const std::vector<int32_t> kRepetitive = {1, 30, 31, 32, 33, 30, 31, 32, 33, 30, 31, 32, 33, 30, 31};
const std::vector<int32_t> kShort = {1, 200};
constexpr int kMaxTokens = 32;

class ServicesTest : public ::testing::Test {
 protected:
  static std::vector<int32_t> Reference(const std::vector<int32_t>& prompt, int n) {
    return GreedyReference(GetTestModels().target_dir, prompt, n);
  }
};

TEST_F(ServicesTest, GreedyOutputEqualsPlainEngineForEveryPolicyAndProposer) {
  Cluster& cluster = Cluster::Get();
  auto tokenizer = engine::Tokenizer::LoadFromFile(GetTestModels().target_dir + "/tokenizer.model");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string text = "The quick brown fox jumps over the lazy dog. The quick brown fox";
  const std::vector<int32_t> text_tokens = (*tokenizer)->Encode(text, /*add_bos=*/true);
  const std::vector<std::vector<int32_t>> prompts = {kVaried, kRepetitive, kShort, text_tokens};
  std::vector<std::vector<int32_t>> references;
  for (const auto& prompt : prompts) references.push_back(Reference(prompt, kMaxTokens));

  struct Config {
    std::string policy;
    std::string pool;
    std::vector<std::string> flags = {};
  };
  std::vector<Config> configs = {{"none", ""}};
  for (int k = 1; k <= 5; ++k) {
    for (const char* pool : {"model", "ngram"}) configs.push_back({"static:" + std::to_string(k), pool});
  }
  // Trees: one level of siblings, narrow and wide trees, and smartspec choosing per request.
  for (const char* policy : {"static-tree:1:3", "static-tree:3:8", "static-tree:4:16", "smartspec"}) {
    for (const char* pool : {"model", "ngram"}) configs.push_back({policy, pool});
  }
  // The router drafts ahead while the verifier runs where that pays (--pipeline on, the
  // default, in every config above); the same chains and smartspec's mix of shapes serially.
  for (const char* policy : {"static:3", "smartspec"}) {
    for (const char* pool : {"model", "ngram"}) configs.push_back({policy, pool, {"--pipeline", "off"}});
  }
  // Drafts made ahead cover other outcomes of the step in every config above (four, the
  // router's default for greedy requests; the draft model drafts after them, the n-gram drafter
  // offers none); here two, fewer than a static:3 hypothesis has positions, so that some
  // outcomes are left uncovered.
  for (const char* policy : {"static:3", "smartspec"}) {
    for (const char* pool : {"model", "ngram"}) configs.push_back({policy, pool, {"--draft-ahead-alternatives", "2"}});
  }
  for (const Config& config : configs) {
    const std::string& router = cluster.Router(config.policy, config.flags);
    int64_t drafted = 0, steps = 0;
    for (size_t p = 0; p < prompts.size(); ++p) {
      v1::GenerateRequest request = TokenRequest(prompts[p], kMaxTokens, config.pool);
      if (p == 3) {  // the text prompt goes in as text, tokenized by the router
        request.set_text(text);
      }
      const Generated out = Generate(router, request);
      ASSERT_TRUE(out.status.ok()) << config.policy << "/" << config.pool << ": " << out.status.error_message();
      EXPECT_EQ(out.tokens, references[p]) << config.policy << "/" << config.pool << " prompt " << p;
      EXPECT_EQ(out.final.finish_reason(), v1::FINISH_REASON_LENGTH);
      EXPECT_EQ(out.final.usage().completion_tokens(), kMaxTokens);
      EXPECT_EQ(out.final.usage().prompt_tokens(), static_cast<int32_t>(prompts[p].size()));
      EXPECT_LE(out.final.usage().accepted_tokens(), out.final.usage().drafted_tokens());
      drafted += out.final.usage().drafted_tokens();
      steps += out.final.usage().steps();
    }
    // A tree's drafts are wider than its depth: the draft model fills the 16-node budget
    // over 4 levels, so more than 4 nodes per step are verified on average.
    if (config.policy == "static-tree:4:16" && config.pool == "model") {
      EXPECT_GT(drafted, 4 * steps) << "no trees were verified";
    }
    if (config.policy == "none") {
      EXPECT_EQ(drafted, 0);
    } else {
      EXPECT_GT(drafted, 0) << config.policy << "/" << config.pool << " never speculated";
    }
  }
}

// Concurrent streams share steps: with smartspec a step mixes chains, trees and plain decodes
// (and the model and n-gram pools); every output still equals the target alone.
TEST_F(ServicesTest, SixteenConcurrentStreamsCompleteWithCorrectOutputs) {
  constexpr int kRequests = 16;
  std::vector<std::vector<int32_t>> prompts(kRequests);
  std::vector<int> lengths(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    prompts[i] = {1, 10 + i, 20 + 2 * i, 7, 10 + i, 20 + 2 * i};
    lengths[i] = 6 + 3 * i;
  }
  for (const char* policy : {"static:3", "static-tree:3:8", "smartspec"}) {
    const std::string& router = Cluster::Get().Router(policy);
    std::vector<Generated> outputs(kRequests);
    std::vector<std::thread> threads;
    for (int i = 0; i < kRequests; ++i) {
      threads.emplace_back([&, i] {
        outputs[i] = Generate(router, TokenRequest(prompts[i], lengths[i], i % 2 ? "ngram" : "model"));
      });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < kRequests; ++i) {
      ASSERT_TRUE(outputs[i].status.ok()) << policy << " " << i << ": " << outputs[i].status.error_message();
      EXPECT_EQ(outputs[i].tokens, Reference(prompts[i], lengths[i])) << policy << " request " << i;
    }
  }
}

// Services on one host can talk over Unix sockets (--host unix:///PATH, and the same address on
// the router's --verifier / --drafter); the output is the target's as over TCP, with Verify and
// Propose over the workers' step sockets (PATH.step, the default) and with every call on gRPC.
TEST_F(ServicesTest, ServicesOverUnixSocketsGiveTheSameOutput) {
  const TestModels& models = GetTestModels();
  splitspec::testing::ScopedTempDir dir("unix_sockets_");
  const std::string verifier_socket = "unix://" + dir.path() + "/verifier.sock";
  const std::string drafter_socket = "unix://" + dir.path() + "/drafter.sock";
  const std::string router_socket = "unix://" + dir.path() + "/router.sock";
  auto verifier = Process::Start({SPLITSPEC_VERIFIER_BIN, "--model", models.target_dir, "--expose-model-path", "--host", verifier_socket,
                                  "--threads", "1", "--metrics-port", "-1"});
  auto drafter = Process::Start({SPLITSPEC_DRAFTER_BIN, "--model", models.draft_dir, "--host", drafter_socket,
                                 "--threads", "1", "--metrics-port", "-1"});
  EXPECT_EQ(verifier->address(), verifier_socket);
  const std::string verifier_step = dir.path() + "/verifier.sock.step";
  const std::string drafter_step = dir.path() + "/drafter.sock.step";
  struct stat st;
  ASSERT_EQ(stat(verifier_step.c_str(), &st), 0) << "the verifier serves Verify on its step socket";
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(drafter_step.c_str(), &st), 0) << "the drafter serves Propose on its step socket";
  rpc::VerifierClient verifier_client(rpc::MakeChannel(verifier_socket));
  rpc::DrafterClient drafter_client(rpc::MakeChannel(drafter_socket));
  // Step sockets with the router polling around each answer (the default), sleeping until it,
  // and not at all; their frames through shared memory (the default) and on the socket.
  for (const auto& [step_sockets, spin_us, memory] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"on", "300", "on"}, {"on", "0", "on"}, {"on", "300", "off"}, {"on", "0", "off"}, {"off", "300", "on"}}) {
    const std::string label =
        "--step-sockets " + step_sockets + " --step-spin-us " + spin_us + " --step-memory " + memory;
    auto router = Process::Start({SPLITSPEC_ROUTER_BIN, "--verifier", verifier_socket, "--drafter",
                                  "model=" + drafter_socket, "--host", router_socket, "--metrics-port", "-1",
                                  "--policy", "static:3", "--step-sockets", step_sockets, "--step-spin-us", spin_us,
                                  "--step-memory", memory});
    EXPECT_EQ(router->address(), router_socket);
    const Generated out = Generate(router->address(), TokenRequest(kVaried, kMaxTokens, "model"));
    ASSERT_TRUE(out.status.ok()) << label << ": " << out.status.error_message();
    EXPECT_EQ(out.tokens, Reference(kVaried, kMaxTokens)) << label;
    EXPECT_GT(out.final.usage().drafted_tokens(), 0);
    EXPECT_EQ(router->Stop(), 0);
    // The router released the finished request's sessions before it went idle (on the step
    // sockets where they are on).
    EXPECT_EQ(verifier_client.GetInfo()->live_sessions, 0) << label;
    EXPECT_EQ(drafter_client.GetInfo()->live_sessions, 0) << label;
  }
  EXPECT_EQ(drafter->Stop(), 0);
  EXPECT_EQ(verifier->Stop(), 0);
  EXPECT_NE(stat(verifier_step.c_str(), &st), 0) << "a stopped worker removes its step socket";
  EXPECT_NE(stat(drafter_step.c_str(), &st), 0);
}

// Connections in the ESTABLISHED state whose local port is `port` (the server's side of each),
// from the kernel's tables: a router that took a worker's TCP step port holds one.
int EstablishedConnectionsTo(int port) {
  int count = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      const size_t colon = local.rfind(':');
      if (colon == std::string::npos || state != "01") continue;  // 01: ESTABLISHED
      if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) ++count;
    }
  }
  return count;
}

// Workers on TCP addresses with --step-port: each reports its step port in GetInfo, a router
// with step sockets on connects to both ports and gives the target's output, and one with them
// off leaves the ports alone and gives the same.
TEST_F(ServicesTest, TcpStepPortsGiveTheSameOutput) {
  const TestModels& models = GetTestModels();
  auto verifier = Process::Start({SPLITSPEC_VERIFIER_BIN, "--model", models.target_dir, "--expose-model-path",
                                  "--port", "0", "--threads", "1", "--metrics-port", "-1", "--step-port", "0"});
  auto drafter = Process::Start({SPLITSPEC_DRAFTER_BIN, "--model", models.draft_dir, "--port", "0", "--threads", "1",
                                 "--metrics-port", "-1", "--step-port", "0"});
  rpc::VerifierClient verifier_client(rpc::MakeChannel(verifier->address()));
  rpc::DrafterClient drafter_client(rpc::MakeChannel(drafter->address()));
  const int verifier_step_port = verifier_client.GetInfo()->step_port;
  const int drafter_step_port = drafter_client.GetInfo()->step_port;
  ASSERT_GT(verifier_step_port, 0) << "the verifier reports its step port";
  ASSERT_GT(drafter_step_port, 0) << "the drafter reports its step port";
  for (const std::string step_sockets : {"on", "off"}) {
    auto router = Process::Start({SPLITSPEC_ROUTER_BIN, "--verifier", verifier->address(), "--drafter",
                                  "model=" + drafter->address(), "--port", "0", "--metrics-port", "-1", "--policy",
                                  "static:3", "--step-sockets", step_sockets});
    const Generated out = Generate(router->address(), TokenRequest(kVaried, kMaxTokens, "model"));
    ASSERT_TRUE(out.status.ok()) << step_sockets << ": " << out.status.error_message();
    EXPECT_EQ(out.tokens, Reference(kVaried, kMaxTokens)) << step_sockets;
    EXPECT_GT(out.final.usage().drafted_tokens(), 0);
    const int expected = step_sockets == "on" ? 1 : 0;
    EXPECT_EQ(EstablishedConnectionsTo(verifier_step_port), expected) << "--step-sockets " << step_sockets;
    EXPECT_EQ(EstablishedConnectionsTo(drafter_step_port), expected) << "--step-sockets " << step_sockets;
    EXPECT_EQ(router->Stop(), 0);
    EXPECT_EQ(verifier_client.GetInfo()->live_sessions, 0) << step_sockets;
    EXPECT_EQ(drafter_client.GetInfo()->live_sessions, 0) << step_sockets;
  }
  EXPECT_EQ(drafter->Stop(), 0);
  EXPECT_EQ(verifier->Stop(), 0);
}

// Suffix decoding as a drafter pool: chains and trees from the request's own tokens and from
// requests that finished before it; outputs are the target's.
TEST_F(ServicesTest, SuffixDrafterKeepsGreedyOutputsExact) {
  Cluster& cluster = Cluster::Get();
  auto suffix = Process::Start({SPLITSPEC_DRAFTER_BIN, "--suffix", "--port", "0", "--metrics-port", "-1"});
  for (const char* policy : {"static:3", "static-tree:3:8"}) {
    auto router = Process::Start({SPLITSPEC_ROUTER_BIN, "--verifier", cluster.verifier(), "--drafter",
                                  "suffix=" + suffix->address(), "--policy", policy, "--port", "0",
                                  "--metrics-port", "-1"});
    int64_t drafted = 0;
    // The same prompts twice: the second time the finished first runs are in the cache.
    for (int round = 0; round < 2; ++round) {
      for (const auto& prompt : {kVaried, kRepetitive}) {
        const Generated out = Generate(router->address(), TokenRequest(prompt, kMaxTokens, "suffix"));
        ASSERT_TRUE(out.status.ok()) << policy << ": " << out.status.error_message();
        EXPECT_EQ(out.tokens, Reference(prompt, kMaxTokens)) << policy << " round " << round;
        drafted += out.final.usage().drafted_tokens();
      }
    }
    EXPECT_GT(drafted, 0) << policy;
    EXPECT_EQ(router->Stop(), 0);
  }
  EXPECT_EQ(suffix->Stop(), 0);
}

// A router given the verifier and a drafter pool as DNS names (one replica per address; a
// Kubernetes headless Service's) generates as with plain addresses, and drafts.
TEST_F(ServicesTest, WorkersByDnsNameServeTheSameOutput) {
  Cluster& cluster = Cluster::Get();
  auto port_of = [](const std::string& address) { return address.substr(address.rfind(':') + 1); };
  const std::string port = port_of(cluster.verifier());
  auto resolved = rpc::ResolveAddresses("dns:///localhost:" + port);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_NE(std::find(resolved->begin(), resolved->end(), "127.0.0.1:" + port), resolved->end());
  EXPECT_TRUE(absl::IsInvalidArgument(rpc::ResolveAddresses("dns:///localhost").status()));
  // Only the IPv4 answers serve here (the workers listen on 127.0.0.1): the router keeps an
  // unreachable verifier replica down and serves from the other, and a drafter pool moves
  // requests off a replica whose call fails.
  auto router = Process::Start({SPLITSPEC_ROUTER_BIN, "--verifier", "dns:///localhost:" + port, "--drafter",
                                "model=dns:///localhost:" + port_of(cluster.model_drafter()), "--policy",
                                "static:3", "--port", "0", "--metrics-port", "-1", "--resolve-interval-seconds",
                                "0.2"});
  for (const std::vector<int32_t>& prompt : {kVaried, kRepetitive}) {
    const Generated out = Generate(router->address(), TokenRequest(prompt, kMaxTokens, "model"));
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.tokens, Reference(prompt, kMaxTokens));
    EXPECT_GT(out.final.usage().drafted_tokens(), 0) << "the pool named by DNS never drafted";
  }
  EXPECT_EQ(router->Stop(), 0);
}

TEST_F(ServicesTest, CancelMidStreamReleasesDrafterAndVerifierSessions) {
  Cluster& cluster = Cluster::Get();
  const std::string& router = cluster.Router("static:2");
  rpc::VerifierClient verifier(rpc::MakeChannel(cluster.verifier()));
  rpc::DrafterClient drafter(rpc::MakeChannel(cluster.model_drafter()));
  auto stub = v1::Router::NewStub(rpc::MakeChannel(router));
  grpc::ClientContext context;
  auto reader = stub->Generate(&context, TokenRequest(kVaried, 4000, "model"));
  v1::GenerateResponse response;
  // Two streamed messages: the request is running and has sessions on both workers.
  ASSERT_TRUE(reader->Read(&response));
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(verifier.GetInfo()->live_sessions, 1);
  EXPECT_EQ(WaitForLiveSessions([&] { return drafter.GetInfo()->live_sessions; }, 1), 1);
  context.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(WaitForLiveSessions([&] { return verifier.GetInfo()->live_sessions; }, 0), 0);
  EXPECT_EQ(WaitForLiveSessions([&] { return drafter.GetInfo()->live_sessions; }, 0), 0);
}

TEST_F(ServicesTest, StopStringEndsTheTextBeforeIt) {
  const std::string& router = Cluster::Get().Router("static:2");
  v1::GenerateRequest request = TokenRequest(kVaried, 40, "model");
  const Generated full = Generate(router, request);
  ASSERT_TRUE(full.status.ok()) << full.status.error_message();
  // A random model's text is mostly non-ASCII: stop at an ASCII letter from its second half
  // (a whole character, so the stop string is valid UTF-8).
  std::string stop;
  for (size_t i = full.text.size() / 2; i < full.text.size() && stop.empty(); ++i) {
    if (std::isalnum(static_cast<unsigned char>(full.text[i]))) stop = full.text.substr(i, 1);
  }
  ASSERT_FALSE(stop.empty()) << "no ASCII letter in the second half of: " << full.text;
  request.add_stop(stop);
  const Generated stopped = Generate(router, request);
  ASSERT_TRUE(stopped.status.ok()) << stopped.status.error_message();
  EXPECT_EQ(stopped.final.finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(stopped.text, full.text.substr(0, full.text.find(stop)));
}

TEST_F(ServicesTest, DrafterThatIsDownMeansPlainDecoding) {
  Cluster& cluster = Cluster::Get();
  // Port 1 on loopback refuses connections: the pool exists but never answers.
  auto router = cluster.StartRouter({"--drafter", "model=127.0.0.1:1", "--policy", "static:3"});
  const Generated out = Generate(router->address(), TokenRequest(kRepetitive, 20, "model"));
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.tokens, Reference(kRepetitive, 20));
  EXPECT_EQ(out.final.usage().drafted_tokens(), 0);
  EXPECT_EQ(router->Stop(), 0);
}

TEST_F(ServicesTest, HealthAndInfo) {
  Cluster& cluster = Cluster::Get();
  const std::string& router = cluster.Router("static:3");
  EXPECT_TRUE(rpc::CheckHealth(rpc::MakeChannel(cluster.verifier()), "splitspec.v1.Verifier").ok());
  EXPECT_TRUE(rpc::CheckHealth(rpc::MakeChannel(cluster.model_drafter()), "splitspec.v1.Drafter").ok());
  EXPECT_TRUE(rpc::CheckHealth(rpc::MakeChannel(router), "splitspec.v1.Router").ok());
  rpc::VerifierClient verifier(rpc::MakeChannel(cluster.verifier()));
  auto info = verifier.GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->model_name, "target");
  EXPECT_EQ(info->vocab_size, 512);
  EXPECT_EQ(info->total_blocks, 2048);
  EXPECT_EQ(info->max_draft_tokens, 16);
  auto stub = v1::Router::NewStub(rpc::MakeChannel(router));
  grpc::ClientContext context;
  v1::ServerInfo server_info;
  ASSERT_TRUE(stub->GetServerInfo(&context, v1::GetServerInfoRequest(), &server_info).ok());
  EXPECT_EQ(server_info.policy(), "static:3");
  EXPECT_EQ(server_info.model_name(), "target");
  EXPECT_EQ(server_info.drafters_size(), 2);
}

// ---- bad input, one case each, against the running services ------------------------------
// A bad item gets its own status over the wire (the call itself succeeds).

TEST_F(ServicesTest, VerifierRejectsUnknownSession) {
  rpc::VerifierClient verifier(rpc::MakeChannel(Cluster::Get().verifier()));
  auto result = verifier.Verify({{987654321, {}}});
  ASSERT_TRUE(result.ok()) << result.status();
  const absl::Status& item = result->results.at(0).status;
  EXPECT_EQ(item.code(), absl::StatusCode::kInvalidArgument) << item;
  EXPECT_NE(item.message().find("unknown session"), std::string::npos);
}

TEST_F(ServicesTest, VerifierRejectsTokenOutOfVocab) {
  rpc::VerifierClient verifier(rpc::MakeChannel(Cluster::Get().verifier()));
  auto result = verifier.Prefill({{555, {1, 5, 100000}, {}}});
  ASSERT_TRUE(result.ok()) << result.status();
  const absl::Status& item = result->at(0).status;
  EXPECT_EQ(item.code(), absl::StatusCode::kInvalidArgument) << item;
  EXPECT_NE(item.message().find("vocabulary"), std::string::npos);
}

TEST_F(ServicesTest, VerifierRejectsMalformedTree) {
  rpc::VerifierClient verifier(rpc::MakeChannel(Cluster::Get().verifier()));
  ASSERT_TRUE(verifier.Prefill({{556, kShort, {}}}).ok());
  spec::DraftProposal draft;
  draft.tokens = {5, 6};
  draft.parents = {-1, 3};
  auto result = verifier.Verify({{556, draft}});
  ASSERT_TRUE(result.ok()) << result.status();
  const absl::Status& item = result->results.at(0).status;
  EXPECT_EQ(item.code(), absl::StatusCode::kInvalidArgument) << item;
  EXPECT_NE(item.message().find("malformed draft tree"), std::string::npos);
  EXPECT_TRUE(verifier.Release({556}).ok());
}

TEST_F(ServicesTest, DrafterRejectsKAboveItsMaximum) {
  rpc::DrafterClient drafter(rpc::MakeChannel(Cluster::Get().model_drafter()));
  spec::ProposeItem item;
  item.id = 557;
  item.new_tokens = kShort;
  item.shape.depth = 9;  // the drafter was started with --max-draft-tokens 8
  auto result = drafter.Propose({item});
  ASSERT_TRUE(result.ok()) << result.status();
  const absl::Status& refused = result->results.at(0).status;
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("max-draft-tokens"), std::string::npos);
}

TEST_F(ServicesTest, RouterRejectsTokenOutOfVocab) {
  const Generated out = Generate(Cluster::Get().Router("none"), TokenRequest({1, 2, 4096}, 4));
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << out.status.error_message();
}

TEST_F(ServicesTest, RouterRejectsMissingPrompt) {
  v1::GenerateRequest request;
  request.set_max_tokens(4);
  const Generated out = Generate(Cluster::Get().Router("none"), request);
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << out.status.error_message();
}

TEST_F(ServicesTest, RouterQueueLimitIsResourceExhausted) {
  Cluster& cluster = Cluster::Get();
  const std::string& router = cluster.Router("none", {"--max-running", "1", "--max-queue", "1"});
  auto stub = v1::Router::NewStub(rpc::MakeChannel(router));
  // A runs (long), B waits in the queue, C finds the queue full.
  grpc::ClientContext a_context, b_context;
  auto a = stub->Generate(&a_context, TokenRequest(kVaried, 4000));
  v1::GenerateResponse response;
  ASSERT_TRUE(a->Read(&response));
  auto b = stub->Generate(&b_context, TokenRequest(kShort, 4));
  auto queued = [&] {
    grpc::ClientContext context;
    v1::ServerInfo info;
    return stub->GetServerInfo(&context, v1::GetServerInfoRequest(), &info).ok() ? info.queue_depth() : -1;
  };
  ASSERT_EQ(WaitForLiveSessions(queued, 1), 1);
  const Generated c = Generate(router, TokenRequest(kShort, 4));
  EXPECT_EQ(c.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << c.status.error_message();
  a_context.TryCancel();
  while (a->Read(&response)) {
  }
  a->Finish();
  // B runs once A is gone.
  std::vector<int32_t> b_tokens;
  while (b->Read(&response)) b_tokens.insert(b_tokens.end(), response.token_ids().begin(), response.token_ids().end());
  EXPECT_TRUE(b->Finish().ok());
  EXPECT_EQ(b_tokens, Reference(kShort, 4));
}

// Last: every process drains and exits 0 on SIGTERM.
TEST_F(ServicesTest, ZzzEveryProcessExitsCleanlyOnSigterm) {
  Cluster& cluster = Cluster::Get();
  cluster.Router("static:1");
  for (const auto& [name, status] : cluster.StopAll()) {
    EXPECT_TRUE(WIFEXITED(status)) << name << " did not exit normally (status " << status << ")";
    EXPECT_EQ(WEXITSTATUS(status), 0) << name;
  }
}

}  // namespace
}  // namespace splitspec::testing
