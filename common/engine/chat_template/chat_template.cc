// Chat template loading and application (see chat_template.h).
#include "common/engine/chat_template/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/engine/chat_template/jinja_parser.h"
#include "common/engine/chat_template/jinja_renderer.h"

namespace splitspec::chat_template {
namespace {

// "text" or {"content": "text", ...} (how tokenizer_config.json writes special tokens).
std::string TokenString(const Json& config, const char* key) {
  if (!config.contains(key)) return "";
  const Json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Create(std::string_view source, std::string bos_token, std::string eos_token) {
  absl::StatusOr<NodeList> nodes = ParseTemplate(source);
  if (!nodes.ok()) return nodes.status();
  ChatTemplate t;
  t.nodes_ = std::make_shared<const NodeList>(*std::move(nodes));
  t.bos_token_ = std::move(bos_token);
  t.eos_token_ = std::move(eos_token);
  return t;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromTokenizerConfig(std::string_view config_json) {
  const Json config = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return absl::InvalidArgumentError("tokenizer_config.json is not a JSON object");
  std::string source;
  const Json templ = config.contains("chat_template") ? config["chat_template"] : Json();
  if (templ.is_string()) {
    source = templ.get<std::string>();
  } else if (templ.is_array()) {
    for (const Json& named : templ) {
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") && named["template"].is_string()) {
        source = named["template"].get<std::string>();
      }
    }
  }
  if (source.empty()) return absl::NotFoundError("tokenizer_config.json has no chat_template");
  return Create(source, TokenString(config, "bos_token"), TokenString(config, "eos_token"));
}

absl::StatusOr<ChatTemplate> ChatTemplate::ForModelDir(const std::string& model_dir, const std::string& override_path) {
  const std::string config_path = (std::filesystem::path(model_dir) / "tokenizer_config.json").string();
  std::string config = "{}";
  if (std::filesystem::exists(config_path)) {
    absl::StatusOr<std::string> read = ReadFile(config_path);
    if (!read.ok()) return read.status();
    config = *std::move(read);
  }
  if (override_path.empty()) {
    absl::StatusOr<ChatTemplate> t = FromTokenizerConfig(config);
    if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(config_path, ": ", t.status().message()));
    return t;
  }
  absl::StatusOr<std::string> source = ReadFile(override_path);
  if (!source.ok()) return source.status();
  const Json parsed = Json::parse(config, nullptr, false);
  const Json tokens = parsed.is_object() ? parsed : Json::object();
  absl::StatusOr<ChatTemplate> t = Create(*source, TokenString(tokens, "bos_token"), TokenString(tokens, "eos_token"));
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(override_path, ": ", t.status().message()));
  return t;
}

absl::StatusOr<std::string> ChatTemplate::Apply(const Json& messages, bool add_generation_prompt, const Json& extra) const {
  if (!messages.is_array()) return absl::InvalidArgumentError("messages must be a list");
  Json variables = extra.is_object() ? extra : Json::object();
  variables["messages"] = messages;
  variables["add_generation_prompt"] = add_generation_prompt;
  variables["bos_token"] = bos_token_;
  variables["eos_token"] = eos_token_;
  return RenderTemplate(*nodes_, variables);
}

}  // namespace splitspec::chat_template
