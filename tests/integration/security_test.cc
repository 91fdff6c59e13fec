// Security of the real services: workers serving mutual TLS refuse every caller without a
// certificate from their CA (a stranger's Release and Verify never reach the sessions, and a
// request running meanwhile keeps its output), the router's public API wants its bearer token,
// a plaintext health-only port answers probes, and by default a worker neither offers
// reflection nor reveals its model's path. The router checks a worker's certificate names the
// address it dials, and both sides read rotated certificate files without a restart.
// Certificates come from the openssl command line, made fresh in a temporary directory.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/rpc/server.h"
#include "common/rpc/step_socket_wire.h"
#include "common/rpc/worker_clients.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "httplib.h"
#include "splitspec/v1/drafter.grpc.pb.h"
#include "splitspec/v1/router.grpc.pb.h"
#include "splitspec/v1/verifier.grpc.pb.h"
#include "tests/integration/cluster.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec::testing {
namespace {

// A CA, a certificate it signs for 127.0.0.1 / localhost (servers and the router as client),
// one it signs for another host only, one for the name localhost only, a second CA with a certificate of its own (a stranger's,
// and what the first set rotates to).
class Certificates {
 public:
  Certificates() : dir_("certs_") {
    for (const std::string ca : {"ca", "ca2"}) {
      Run("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=splitspec-test-" + ca + " -keyout " + ca +
          ".key -out " + ca + ".pem");
    }
    Issue("ca", "node", "subjectAltName=IP:127.0.0.1,DNS:localhost");
    Issue("ca", "elsewhere", "subjectAltName=DNS:elsewhere.example");
    Issue("ca", "named", "subjectAltName=DNS:localhost");  // a Service's name, no address
    Issue("ca2", "node2", "subjectAltName=IP:127.0.0.1,DNS:localhost");
  }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

 private:
  void Run(const std::string& command) {
    const std::string full = "cd '" + dir_.path() + "' && " + command + " > /dev/null 2>&1";
    ASSERT_EQ(std::system(full.c_str()), 0) << command;
  }
  void Issue(const std::string& ca, const std::string& name, const std::string& alt_names) {
    std::ofstream(Path(name + ".ext")) << alt_names << "\n"
                                       << "extendedKeyUsage=serverAuth,clientAuth\n";
    Run("openssl req -newkey rsa:2048 -nodes -subj /CN=" + name + " -keyout " + name + ".key -out " + name + ".csr");
    Run("openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca + ".key -CAcreateserial -days 2 " +
        "-extfile " + name + ".ext -out " + name + ".pem");
  }
  ScopedTempDir dir_;
};

std::string ReadFile(const std::string& path) { return *rpc::ReadPemFile(path); }

std::shared_ptr<grpc::Channel> TlsChannel(const std::string& address, const Certificates& certs,
                                          const std::string& trusted_ca, const std::string& client) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = ReadFile(certs.Path(trusted_ca + ".pem"));
  if (!client.empty()) {
    options.pem_private_key = ReadFile(certs.Path(client + ".key"));
    options.pem_cert_chain = ReadFile(certs.Path(client + ".pem"));
  }
  return grpc::CreateChannel(address, grpc::SslCredentials(options));
}

struct Generated {
  grpc::Status status;
  std::vector<int32_t> tokens;
  int32_t drafted_tokens = 0;
};

Generated Generate(const std::string& router, const std::vector<int32_t>& prompt, int max_tokens,
                   const std::string& token) {
  auto stub = v1::Router::NewStub(grpc::CreateChannel(router, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  v1::GenerateRequest request;
  request.mutable_tokens()->mutable_ids()->Add(prompt.begin(), prompt.end());
  request.set_max_tokens(max_tokens);
  request.set_ignore_eos(true);
  Generated out;
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    out.tokens.insert(out.tokens.end(), response.token_ids().begin(), response.token_ids().end());
    out.drafted_tokens = response.usage().drafted_tokens();
  }
  out.status = reader->Finish();
  return out;
}

grpc::StatusCode StrangerRelease(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::Verifier::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ReleaseRequest request;
  for (uint64_t id = 0; id < 200; ++id) request.add_request_ids(id);
  v1::ReleaseResponse response;
  return stub->Release(&context, request, &response).error_code();
}

grpc::StatusCode StrangerDrafterRelease(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::Drafter::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ReleaseRequest request;
  for (uint64_t id = 0; id < 200; ++id) request.add_request_ids(id);
  v1::ReleaseResponse response;
  return stub->Release(&context, request, &response).error_code();
}

// GetInfo over a connection of its own (a fresh TLS handshake, never a pooled one) with the
// credentials the router's channels use.
grpc::StatusCode GetInfoOnANewConnection(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = v1::Verifier::NewStub(grpc::CreateCustomChannel(address, rpc::WorkerChannelCredentials(), args));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::WorkerInfo info;
  return stub->GetInfo(&context, v1::GetInfoRequest(), &info).error_code();
}

grpc::StatusCode StrangerVerify(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::Verifier::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::VerifyRequest request;
  for (uint64_t id = 0; id < 8; ++id) request.add_items()->set_request_id(id);
  v1::VerifyResponse response;
  return stub->Verify(&context, request, &response).error_code();
}

// grpc.reflection.v1alpha's ServerReflectionInfo with a list_services request, sent as one
// message: UNIMPLEMENTED unless the server registered reflection.
grpc::StatusCode ReflectionCall(const std::string& address) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  const char list_services[] = {0x3a, 0x00};  // field 7 (list_services), empty string
  grpc::Slice slice(list_services, sizeof(list_services));
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  // The method name must outlive the call.
  const std::string method = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  return done.get_future().get().error_code();
}

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certs_ = new Certificates(); }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }
  static std::vector<std::string> WorkerTls() {
    return {"--tls-cert", certs_->Path("node.pem"), "--tls-key", certs_->Path("node.key"), "--tls-client-ca",
            certs_->Path("ca.pem")};
  }
  static Certificates* certs_;
};
Certificates* SecurityTest::certs_ = nullptr;

TEST_F(SecurityTest, MutualTlsRefusesStrangersAndTheRouterWantsItsToken) {
  const TestModels& models = GetTestModels();
  std::vector<std::string> verifier_argv = {SPLITSPEC_VERIFIER_BIN, "--model", models.target_dir, "--port", "0",
                                            "--threads", "1", "--metrics-port", "-1", "--health-port", "0",
                                            "--expose-model-path"};
  for (const std::string& flag : WorkerTls()) verifier_argv.push_back(flag);
  auto verifier = Process::Start(verifier_argv);
  const std::string health_line = verifier->ReadLine();
  ASSERT_NE(health_line.find("health on port "), std::string::npos) << health_line;
  const std::string health_port = health_line.substr(health_line.rfind(' ') + 1);
  std::vector<std::string> drafter_argv = {SPLITSPEC_DRAFTER_BIN, "--model", models.draft_dir, "--port", "0",
                                           "--threads", "1", "--metrics-port", "-1"};
  for (const std::string& flag : WorkerTls()) drafter_argv.push_back(flag);
  auto drafter = Process::Start(drafter_argv);
  // One key file for the gRPC and the HTTP API (a Kubernetes Secret's).
  ScopedTempDir secrets("secrets_");
  std::ofstream(secrets.path() + "/api-key") << "s3cret\n";
  auto router = Process::Start({SPLITSPEC_ROUTER_BIN, "--verifier", verifier->address(), "--drafter",
                                "model=" + drafter->address(), "--port", "0", "--metrics-port", "0", "--http-port",
                                "0", "--policy", "static:3", "--worker-tls-cert", certs_->Path("node.pem"),
                                "--worker-tls-key", certs_->Path("node.key"), "--worker-tls-ca",
                                certs_->Path("ca.pem"), "--api-key-file", secrets.path() + "/api-key"});
  const std::string metrics_line = router->ReadLine();
  const std::string http_line = router->ReadLine();
  ASSERT_NE(metrics_line.find("metrics on "), std::string::npos) << metrics_line;
  ASSERT_NE(http_line.find("OpenAI API on "), std::string::npos) << http_line;

  // A session the test owns, as the router owns its requests', on a live id.
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5, 300, 12, 480, 77};
  constexpr spec::RequestId kOwned = 7;
  rpc::VerifierClient owner(TlsChannel(verifier->address(), *certs_, "ca", "node"));
  auto prefilled = owner.Prefill({spec::PrefillItem{kOwned, prompt, {}}});
  ASSERT_TRUE(prefilled.ok()) << prefilled.status();
  ASSERT_TRUE((*prefilled)[0].status.ok()) << (*prefilled)[0].status;

  // A victim request runs through the router while strangers call the workers.
  constexpr int kTokens = 96;
  Generated victim;
  std::thread victim_thread([&] { victim = Generate(router->address(), prompt, kTokens, "s3cret"); });
  // Plaintext, TLS without a client certificate, and TLS with a certificate from another CA:
  // every one refused before reaching a session (ids 0..199 include the owned one).
  auto strangers = [&](const std::string& address) {
    return std::vector<std::pair<const char*, std::shared_ptr<grpc::Channel>>>{
        {"plaintext", grpc::CreateChannel(address, grpc::InsecureChannelCredentials())},
        {"no client certificate", TlsChannel(address, *certs_, "ca", "")},
        {"certificate of another CA", TlsChannel(address, *certs_, "ca", "node2")},
    };
  };
  for (const auto& [what, channel] : strangers(verifier->address())) {
    EXPECT_EQ(StrangerRelease(channel), grpc::StatusCode::UNAVAILABLE) << what;
    EXPECT_EQ(StrangerVerify(channel), grpc::StatusCode::UNAVAILABLE) << what;
  }
  for (const auto& [what, channel] : strangers(drafter->address())) {
    EXPECT_EQ(StrangerDrafterRelease(channel), grpc::StatusCode::UNAVAILABLE) << what;
  }
  victim_thread.join();
  ASSERT_TRUE(victim.status.ok()) << victim.status.error_message();
  EXPECT_EQ(victim.tokens, GreedyReference(models.target_dir, prompt, kTokens));
  // The owned session is intact: its next token is the greedy one.
  auto verified = owner.Verify({spec::VerifyItem{kOwned, {}}});
  ASSERT_TRUE(verified.ok()) << verified.status();
  ASSERT_TRUE(verified->results[0].status.ok()) << verified->results[0].status;
  EXPECT_EQ((std::vector<int32_t>{(*prefilled)[0].next_token, verified->results[0].tokens.at(0)}),
            GreedyReference(models.target_dir, prompt, 2));
  EXPECT_TRUE(owner.Release({kOwned}).ok());

  // The router's public API: its token or UNAUTHENTICATED on gRPC, 401 on HTTP.
  EXPECT_EQ(Generate(router->address(), prompt, 4, "").status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Generate(router->address(), prompt, 4, "wrong").status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Generate(router->address(), prompt, 4, "s3cret").status.ok());
  httplib::Client http("http://" + http_line.substr(http_line.rfind(' ') + 1));
  const std::string completion = R"({"prompt": [1, 17, 42], "max_tokens": 2})";
  auto status_of = [](const httplib::Result& result) { return result ? result->status : -1; };
  EXPECT_EQ(status_of(http.Post("/v1/completions", completion, "application/json")), 401);
  EXPECT_EQ(status_of(http.Post("/v1/completions", {{"Authorization", "Bearer wrong"}}, completion,
                                "application/json")),
            401);
  EXPECT_EQ(status_of(http.Get("/v1/models")), 401);
  EXPECT_EQ(status_of(http.Get("/v1/models", {{"Authorization", "Bearer s3cret"}})), 200);
  // Health stays open on both APIs and on the verifier's plaintext health port; so do metrics.
  EXPECT_EQ(status_of(http.Get("/health")), 200);
  httplib::Client metrics("http://" + metrics_line.substr(metrics_line.rfind(' ') + 1));
  EXPECT_EQ(status_of(metrics.Get("/metrics")), 200);
  EXPECT_TRUE(rpc::CheckHealth(grpc::CreateChannel(router->address(), grpc::InsecureChannelCredentials())).ok());
  EXPECT_TRUE(
      rpc::CheckHealth(grpc::CreateChannel("127.0.0.1:" + health_port, grpc::InsecureChannelCredentials())).ok());
  // The health port serves nothing else.
  EXPECT_EQ(StrangerRelease(grpc::CreateChannel("127.0.0.1:" + health_port, grpc::InsecureChannelCredentials())),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(router->Stop(), 0);
  EXPECT_EQ(drafter->Stop(), 0);
  EXPECT_EQ(verifier->Stop(), 0);
}

// The router's TLS is used by this process as a client here (rpc::UseClientTls is process-wide);
// each test restores plaintext when done.
struct ClientTlsScope {
  explicit ClientTlsScope(const rpc::TlsFiles& files) { EXPECT_TRUE(rpc::UseClientTls(files).ok()); }
  ~ClientTlsScope() { (void)rpc::UseClientTls(rpc::TlsFiles{}); }
};

TEST_F(SecurityTest, TheRouterRefusesAWorkerWhoseCertificateNamesAnotherHost) {
  const TestModels& models = GetTestModels();
  auto start = [&](const std::string& cert) {
    return Process::Start({SPLITSPEC_VERIFIER_BIN, "--model", models.target_dir, "--port", "0", "--threads", "1",
                           "--metrics-port", "-1", "--tls-cert", certs_->Path(cert + ".pem"), "--tls-key",
                           certs_->Path(cert + ".key"), "--tls-client-ca", certs_->Path("ca.pem")});
  };
  auto impostor = start("elsewhere");  // our CA signed it, but for elsewhere.example
  auto genuine = start("node");
  ClientTlsScope tls(rpc::TlsFiles{certs_->Path("node.pem"), certs_->Path("node.key"), certs_->Path("ca.pem")});
  EXPECT_EQ(GetInfoOnANewConnection(impostor->address()), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(GetInfoOnANewConnection(genuine->address()), grpc::StatusCode::OK);
  EXPECT_EQ(impostor->Stop(), 0);
  EXPECT_EQ(genuine->Stop(), 0);
}

// A step socket carries no TLS: a worker serving mutual TLS on a Unix socket opens none (which
// would let a caller without a certificate past it), while the same worker in plaintext does.
TEST_F(SecurityTest, AWorkerWithTlsServesNoStepSocket) {
  const TestModels& models = GetTestModels();
  ScopedTempDir dir("tls_unix_");
  const std::string address = "unix://" + dir.path() + "/verifier.sock";
  const std::string step_socket = rpc::StepSocketPath(address);
  std::vector<std::string> argv = {SPLITSPEC_VERIFIER_BIN, "--model", models.target_dir, "--host", address,
                                   "--threads", "1", "--metrics-port", "-1"};
  for (const std::string& flag : WorkerTls()) argv.push_back(flag);
  auto with_tls = Process::Start(argv);
  EXPECT_FALSE(std::filesystem::exists(step_socket)) << "a TLS worker must not serve a plaintext step socket";
  EXPECT_EQ(with_tls->Stop(), 0);
  auto plaintext = Process::Start({SPLITSPEC_VERIFIER_BIN, "--model", models.target_dir, "--host", address,
                                   "--threads", "1", "--metrics-port", "-1"});
  EXPECT_TRUE(std::filesystem::exists(step_socket));
  EXPECT_EQ(plaintext->Stop(), 0);
}

// Workers found by DNS are dialled by address but must prove the name: a pod's certificate
// names its Service, not its IP.
TEST_F(SecurityTest, DiscoveredWorkersAreCheckedAgainstTheNameTheyWereFoundBy) {
  const TestModels& models = GetTestModels();
  auto start = [&](const char* binary, const std::string& model) {
    return Process::Start({binary, "--model", model, "--port", "0", "--threads", "1", "--metrics-port", "-1",
                           "--tls-cert", certs_->Path("named.pem"), "--tls-key", certs_->Path("named.key"),
                           "--tls-client-ca", certs_->Path("ca.pem")});
  };
  auto verifier = start(SPLITSPEC_VERIFIER_BIN, models.target_dir);
  auto drafter = start(SPLITSPEC_DRAFTER_BIN, models.draft_dir);
  auto port_of = [](const std::string& address) { return address.substr(address.rfind(':') + 1); };
  const std::vector<std::string> router_tls = {"--worker-tls-cert", certs_->Path("node.pem"), "--worker-tls-key",
                                               certs_->Path("node.key"), "--worker-tls-ca", certs_->Path("ca.pem")};
  std::vector<std::string> argv = {SPLITSPEC_ROUTER_BIN, "--verifier", "dns:///localhost:" + port_of(verifier->address()),
                                   "--drafter", "model=dns:///localhost:" + port_of(drafter->address()), "--tokenizer",
                                   "none", "--policy", "static:3", "--port", "0", "--metrics-port", "-1"};
  argv.insert(argv.end(), router_tls.begin(), router_tls.end());
  auto router = Process::Start(argv);
  const std::vector<int32_t> prompt = {1, 30, 31, 32, 33, 30, 31, 32, 33};
  const Generated out = Generate(router->address(), prompt, 24, "");
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  EXPECT_EQ(out.tokens, GreedyReference(models.target_dir, prompt, 24));
  EXPECT_GT(out.drafted_tokens, 0) << "the drafter pool found by DNS never drafted";
  EXPECT_EQ(router->Stop(), 0);
  // The same worker dialled by its address: its certificate does not name 127.0.0.1.
  std::string command = std::string(SPLITSPEC_ROUTER_BIN) + " --verifier " + verifier->address() +
                        " --tokenizer none --port 0 --metrics-port -1 --wait-seconds 1";
  for (const std::string& flag : router_tls) command += " '" + flag + "'";
  EXPECT_NE(std::system((command + " > /dev/null 2>&1").c_str()), 0);
  EXPECT_EQ(drafter->Stop(), 0);
  EXPECT_EQ(verifier->Stop(), 0);
}

// What a Kubernetes Secret update does: each file replaced at once (a rename).
void Install(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to + ".new", std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(to + ".new", to);
}

TEST_F(SecurityTest, RotatedCertificatesServeNewConnectionsWithoutARestart) {
  const TestModels& models = GetTestModels();
  ScopedTempDir live("live_certs_");  // the files both sides were started with
  const rpc::TlsFiles files{live.path() + "/tls.crt", live.path() + "/tls.key", live.path() + "/ca.crt", 1};
  auto rotate_to = [&](const std::string& cert, const std::string& ca) {
    Install(certs_->Path(cert + ".key"), files.key);
    Install(certs_->Path(cert + ".pem"), files.cert);
    Install(certs_->Path(ca + ".pem"), files.ca);
  };
  rotate_to("node", "ca");
  auto verifier = Process::Start({SPLITSPEC_VERIFIER_BIN, "--model", models.target_dir, "--port", "0", "--threads",
                                  "1", "--metrics-port", "-1", "--tls-cert", files.cert, "--tls-key", files.key,
                                  "--tls-client-ca", files.ca, "--tls-reload-seconds", "1"});
  ClientTlsScope tls(files);  // the router's side, reading the same files
  EXPECT_EQ(GetInfoOnANewConnection(verifier->address()), grpc::StatusCode::OK);
  // Before the rotation the new CA's certificate is a stranger's.
  EXPECT_EQ(StrangerRelease(TlsChannel(verifier->address(), *certs_, "ca2", "node2")), grpc::StatusCode::UNAVAILABLE);

  rotate_to("node2", "ca2");
  // Each side reads its files again within a second; the deadline only bounds a failure.
  auto eventually_ok = [](const std::function<grpc::StatusCode()>& call) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    grpc::StatusCode code = call();
    while (code != grpc::StatusCode::OK && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      code = call();
    }
    return code;
  };
  // The worker: it presents the new certificate and accepts the new CA's.
  EXPECT_EQ(eventually_ok([&] { return StrangerRelease(TlsChannel(verifier->address(), *certs_, "ca2", "node2")); }),
            grpc::StatusCode::OK);
  // The router's side: until it reads its files it neither trusts the worker's new certificate
  // nor holds one the worker accepts.
  EXPECT_EQ(eventually_ok([&] { return GetInfoOnANewConnection(verifier->address()); }), grpc::StatusCode::OK);
  // The old CA's certificates no longer open the worker.
  EXPECT_EQ(StrangerRelease(TlsChannel(verifier->address(), *certs_, "ca", "node")), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(verifier->Stop(), 0);
}

// A drafter service whose Propose holds its call until released: an in-flight call the
// server's drain waits for.
class HeldDrafter final : public v1::Drafter::Service {
 public:
  grpc::Status Propose(grpc::ServerContext*, const v1::ProposeRequest*, v1::ProposeResponse*) override {
    entered_.set_value();
    release_.get_future().wait();
    return grpc::Status::OK;
  }
  void WaitEntered() { entered_.get_future().wait(); }
  void Release() { release_.set_value(); }

 private:
  std::promise<void> entered_, release_;
};

grpc::health::v1::HealthCheckResponse::ServingStatus HealthOn(int port) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckResponse response;
  if (!stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response).ok()) {
    return grpc::health::v1::HealthCheckResponse::UNKNOWN;
  }
  return response.status();
}

// The health-only port says what the main port would: NOT_SERVING from the moment a drain
// starts (the kubelet takes the pod out of its Service while calls in flight finish).
TEST_F(SecurityTest, TheHealthPortMirrorsTheServerWhileItDrains) {
  HeldDrafter held;
  rpc::ServerOptions options;
  options.health_port = 0;
  options.drain_timeout = absl::Seconds(30);
  options.tls = rpc::TlsFiles{certs_->Path("node.pem"), certs_->Path("node.key"), certs_->Path("ca.pem")};
  auto server = rpc::Server::Start(options, {&held}, {"splitspec.v1.Drafter"});
  ASSERT_TRUE(server.ok()) << server.status();
  const int health_port = (*server)->health_port();
  EXPECT_EQ(HealthOn(health_port), grpc::health::v1::HealthCheckResponse::SERVING);

  grpc::Status in_flight_status;
  std::thread in_flight([&] {
    auto stub = v1::Drafter::NewStub(TlsChannel((*server)->address(), *certs_, "ca", "node"));
    grpc::ClientContext context;
    v1::ProposeResponse response;
    in_flight_status = stub->Propose(&context, v1::ProposeRequest(), &response);
  });
  held.WaitEntered();
  std::thread drain([&] { (*server)->Shutdown(); });
  // The drain's first step; the deadline only bounds a failure.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto status = HealthOn(health_port);
  while (status == grpc::health::v1::HealthCheckResponse::SERVING && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    status = HealthOn(health_port);
  }
  EXPECT_EQ(status, grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  held.Release();
  in_flight.join();
  drain.join();
  EXPECT_TRUE(in_flight_status.ok()) << "the call in flight was cut: " << in_flight_status.error_message();
}

TEST_F(SecurityTest, WorkersHideReflectionAndTheModelPathUnlessAsked) {
  const TestModels& models = GetTestModels();
  auto closed = Process::Start({SPLITSPEC_VERIFIER_BIN, "--model", models.target_dir, "--port", "0", "--threads",
                                "1", "--metrics-port", "-1"});
  auto open = Process::Start({SPLITSPEC_VERIFIER_BIN, "--model", models.target_dir, "--port", "0", "--threads", "1",
                              "--metrics-port", "-1", "--enable-reflection", "--expose-model-path"});
  EXPECT_EQ(ReflectionCall(closed->address()), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(ReflectionCall(open->address()), grpc::StatusCode::UNIMPLEMENTED);
  rpc::VerifierClient closed_client(rpc::MakeChannel(closed->address()));
  rpc::VerifierClient open_client(rpc::MakeChannel(open->address()));
  EXPECT_EQ(*closed_client.GetModelDir(), "");
  EXPECT_EQ(*open_client.GetModelDir(), models.target_dir);
  // Its name is still there for the router's GetServerInfo.
  EXPECT_FALSE(closed_client.GetInfo()->model_name.empty());
  EXPECT_EQ(closed->Stop(), 0);
  EXPECT_EQ(open->Stop(), 0);
}

TEST_F(SecurityTest, ARouterWithoutATokenizerSourceSaysWhatToDo) {
  const TestModels& models = GetTestModels();
  auto verifier = Process::Start({SPLITSPEC_VERIFIER_BIN, "--model", models.target_dir, "--port", "0", "--threads",
                                  "1", "--metrics-port", "-1"});
  const std::string command = std::string(SPLITSPEC_ROUTER_BIN) + " --verifier " + verifier->address() +
                              " --port 0 --metrics-port -1 2>&1 | grep -q -- '--expose-model-path'";
  EXPECT_EQ(std::system(command.c_str()), 0);
  EXPECT_EQ(verifier->Stop(), 0);
}

}  // namespace
}  // namespace splitspec::testing
