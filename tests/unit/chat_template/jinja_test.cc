// The Jinja subset: whitespace rules (trim_blocks, lstrip_blocks, "-"), loop scoping and
// namespace(), expressions, and clear errors for what it does not support or what fails.
#include <string>

#include "common/engine/chat_template/chat_template.h"
#include "common/engine/chat_template/jinja_parser.h"
#include "common/engine/chat_template/jinja_renderer.h"
#include "gtest/gtest.h"

namespace splitspec::chat_template {
namespace {

absl::StatusOr<std::string> Render(const std::string& source, const Json& variables = Json::object()) {
  absl::StatusOr<NodeList> nodes = ParseTemplate(source);
  if (!nodes.ok()) return nodes.status();
  return RenderTemplate(*nodes, variables);
}

std::string RenderOk(const std::string& source, const Json& variables = Json::object()) {
  absl::StatusOr<std::string> out = Render(source, variables);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

TEST(JinjaTest, WhitespaceControl) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks its indentation.
  EXPECT_EQ(RenderOk("{% if true %}\n  a\n  {% endif %}\nb"), "  a\nb");
  EXPECT_EQ(RenderOk("x  {%- if true -%}  y  {%- endif %}"), "xy");
  EXPECT_EQ(RenderOk("{{ 'a' }}\n{{- 'b' -}}\n c"), "abc");
  EXPECT_EQ(RenderOk("a{# comment #}\nb"), "ab");
}

TEST(JinjaTest, LoopScopeAndNamespace) {
  const Json vars = {{"items", {"a", "b", "c"}}};
  EXPECT_EQ(RenderOk("{% set x = 0 %}{% for i in items %}{% set x = loop.index %}{% endfor %}{{ x }}", vars), "0");
  EXPECT_EQ(RenderOk("{% set ns = namespace(n=0) %}{% for i in items %}{% set ns.n = ns.n + loop.index %}{% endfor %}{{ ns.n }}", vars), "6");
  EXPECT_EQ(RenderOk("{% for i in items[::-1] %}{{ i }}{% if not loop.last %},{% endif %}{% endfor %}", vars), "c,b,a");
  EXPECT_EQ(RenderOk("{% for i in items if i != 'b' %}{{ loop.index0 }}{{ i }}{% else %}none{% endfor %}", vars), "0a1c");
  EXPECT_EQ(RenderOk("{% for i in [] %}x{% else %}none{% endfor %}"), "none");
}

TEST(JinjaTest, Expressions) {
  const Json vars = {{"m", {{"role", "user"}, {"content", " <think>a</think>\nb "}}}};
  EXPECT_EQ(RenderOk("{{ m.content.split('</think>')[-1].lstrip('\\n') | trim }}", vars), "b");
  EXPECT_EQ(RenderOk("{{ m['role'] ~ 1 + 2 * 3 }}", vars), "user7");
  EXPECT_EQ(RenderOk("{{ 'yes' if m.missing is not defined and m.role is string else 'no' }}", vars), "yes");
  EXPECT_EQ(RenderOk("{{ '</think>' in m.content }} {{ 7 // 2 }} {{ -7 % 3 }} {{ [1, 2] | length }}", vars), "True 3 2 2");
  EXPECT_EQ(RenderOk("{{ {'b': 1, 'a': [true, none]} | tojson }}"), R"({"b":1,"a":[true,null]})");
  EXPECT_EQ(RenderOk("{{ undefined_name }}|{{ m.nothing }}", vars), "|");
}

TEST(JinjaTest, ErrorsNameWhatFailed) {
  struct Case {
    const char* source;
    const char* named;
  };
  for (const Case& c : {Case{"{% macro f() %}{% endmacro %}", "macro"}, Case{"{{ x | wordcount }}", "wordcount"},
                        Case{"{% if true %}", "endif"}, Case{"{{ raise_exception('bad roles') }}", "bad roles"},
                        Case{"{{ 'a' - 1 }}", "'-'"}, Case{"{{ x is divisibleby(3) }}", "divisibleby"},
                        Case{"{{ 'a'.zfill(3) }}", "zfill"}, Case{"{{ 'unterminated }}", "unclosed tag"},
                        Case{"{% for x in 5 %}{% endfor %}", "loop over"}}) {
    absl::StatusOr<std::string> out = Render(c.source, {{"x", 1}});
    ASSERT_FALSE(out.ok()) << c.source;
    EXPECT_NE(out.status().message().find(c.named), std::string::npos) << out.status();
  }
}

TEST(JinjaTest, OutputIsBounded) {
  absl::StatusOr<NodeList> nodes = ParseTemplate("{% for i in range(1000) %}xxxxxxxxxx{% endfor %}");
  ASSERT_TRUE(nodes.ok());
  EXPECT_FALSE(RenderTemplate(*nodes, Json::object(), 5000).ok());
}

TEST(ChatTemplateTest, FromTokenizerConfig) {
  const std::string config = R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>",
    "chat_template": [{"name": "tool_use", "template": "x"},
                      {"name": "default", "template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"}]})";
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromTokenizerConfig(config);
  ASSERT_TRUE(t.ok()) << t.status();
  const Json messages = Json::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_EQ(*t->Apply(messages, true), "<s>[user]hi</s>[assistant]");
  EXPECT_EQ(*t->Apply(messages, false), "<s>[user]hi</s>");
  EXPECT_EQ(ChatTemplate::FromTokenizerConfig(R"({"bos_token": "<s>"})").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(ChatTemplate::FromTokenizerConfig("{").ok());
  EXPECT_FALSE(t->Apply(Json::object(), true).ok());
}

}  // namespace
}  // namespace splitspec::chat_template
