// Security of the real services: workers serving mutual TLS refuse every caller without a
// certificate from their CA (a stranger's Release and Verify never reach the sessions, and a
// request running meanwhile keeps its output), the router's public API wants its bearer token,
// a plaintext health-only port answers probes, and by default a worker neither offers
// reflection nor reveals its model's path. Certificates come from the openssl command line,
// made fresh in a temporary directory.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/rpc/server.h"
#include "common/rpc/worker_clients.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "splitspec/v1/router.grpc.pb.h"
#include "splitspec/v1/verifier.grpc.pb.h"
#include "tests/integration/cluster.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/unit/verifier/test_models.h"

namespace splitspec::testing {
namespace {

// A CA, a certificate it signs for 127.0.0.1 / localhost (servers and the router as client),
// and a second CA with a client certificate of its own (the stranger).
class Certificates {
 public:
  Certificates() : dir_("certs_") {
    Run("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=splitspec-test-ca -keyout ca.key -out ca.pem");
    Issue("ca", "node", "/CN=localhost");
    Run("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=stranger-ca -keyout stranger-ca.key "
        "-out stranger-ca.pem");
    Issue("stranger-ca", "stranger", "/CN=localhost");
  }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

 private:
  void Run(const std::string& command) {
    const std::string full = "cd '" + dir_.path() + "' && " + command + " > /dev/null 2>&1";
    ASSERT_EQ(std::system(full.c_str()), 0) << command;
  }
  void Issue(const std::string& ca, const std::string& name, const std::string& subject) {
    std::ofstream(Path(name + ".ext")) << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                       << "extendedKeyUsage=serverAuth,clientAuth\n";
    Run("openssl req -newkey rsa:2048 -nodes -subj " + subject + " -keyout " + name + ".key -out " + name + ".csr");
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
  while (reader->Read(&response)) out.tokens.insert(out.tokens.end(), response.token_ids().begin(), response.token_ids().end());
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
  auto router = Process::Start({SPLITSPEC_ROUTER_BIN, "--verifier", verifier->address(), "--drafter",
                                "model=" + drafter->address(), "--port", "0", "--metrics-port", "-1", "--policy",
                                "static:3", "--worker-tls-cert", certs_->Path("node.pem"), "--worker-tls-key",
                                certs_->Path("node.key"), "--worker-tls-ca", certs_->Path("ca.pem"), "--api-key",
                                "s3cret"});

  // A victim request runs while strangers call the verifier.
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5, 300, 12, 480, 77};
  constexpr int kTokens = 96;
  Generated victim;
  std::thread victim_thread([&] { victim = Generate(router->address(), prompt, kTokens, "s3cret"); });
  // Plaintext, TLS without a client certificate, and TLS with a certificate from another CA:
  // every one refused before reaching a session.
  const std::vector<std::pair<const char*, std::shared_ptr<grpc::Channel>>> strangers = {
      {"plaintext", grpc::CreateChannel(verifier->address(), grpc::InsecureChannelCredentials())},
      {"no client certificate", TlsChannel(verifier->address(), *certs_, "ca", "")},
      {"certificate of another CA", TlsChannel(verifier->address(), *certs_, "ca", "stranger")},
  };
  for (const auto& [what, channel] : strangers) {
    EXPECT_EQ(StrangerRelease(channel), grpc::StatusCode::UNAVAILABLE) << what;
    EXPECT_EQ(StrangerVerify(channel), grpc::StatusCode::UNAVAILABLE) << what;
  }
  victim_thread.join();
  ASSERT_TRUE(victim.status.ok()) << victim.status.error_message();
  EXPECT_EQ(victim.tokens, GreedyReference(models.target_dir, prompt, kTokens));

  // A caller with the right certificate is served (what the router does).
  {
    auto stub = v1::Verifier::NewStub(TlsChannel(verifier->address(), *certs_, "ca", "node"));
    grpc::ClientContext context;
    v1::WorkerInfo info;
    EXPECT_TRUE(stub->GetInfo(&context, v1::GetInfoRequest(), &info).ok());
  }
  // The router's public API: its token or UNAUTHENTICATED.
  EXPECT_EQ(Generate(router->address(), prompt, 4, "").status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Generate(router->address(), prompt, 4, "wrong").status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Generate(router->address(), prompt, 4, "s3cret").status.ok());
  // Health stays open on the router, and the verifier's plaintext health port answers.
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
