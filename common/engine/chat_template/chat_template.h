// Chat templates: the Jinja template a model's tokenizer_config.json carries ("chat_template"),
// rendered with the conversation as Hugging Face's apply_chat_template does (messages,
// add_generation_prompt, bos_token, eos_token; trim_blocks and lstrip_blocks on).
//
// The Jinja subset: {{ }}, {% if/elif/else %}, {% for x[, y] in ... [if ...] %} with loop.*,
// {% set x = ... %} and {% set ns.attr = ... %} with namespace(), comments and "-" whitespace
// control; literals, lists, dicts, attribute/index/slice access, arithmetic, comparison, in,
// and/or/not, a if b else c, ~; filters trim, length, tojson, upper, lower, string, first,
// last, join, default, capitalize, list, int, safe; tests defined, none, string, number,
// boolean, true, false, mapping, iterable, sequence, odd, even; string methods strip /
// lstrip / rstrip / split / startswith / endswith / upper / lower / replace, dict items /
// keys / values / get; raise_exception(), range(). Anything else is an error naming it.
#ifndef SPLITSPEC_COMMON_ENGINE_CHAT_TEMPLATE_CHAT_TEMPLATE_H_
#define SPLITSPEC_COMMON_ENGINE_CHAT_TEMPLATE_CHAT_TEMPLATE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/engine/chat_template/jinja_ast.h"

namespace splitspec::chat_template {

// Immutable after creation; thread-safe.
class ChatTemplate {
 public:
  // Parses `source`; a syntax error or unsupported construct is an error now, not per request.
  static absl::StatusOr<ChatTemplate> Create(std::string_view source, std::string bos_token, std::string eos_token);
  // From a tokenizer_config.json: its chat_template (a string, or a list of named templates
  // of which "default" is used) and its bos/eos tokens. NotFound when it has no template.
  static absl::StatusOr<ChatTemplate> FromTokenizerConfig(std::string_view config_json);
  // The model directory's template: `override_path` (a Jinja file) when not empty, else the
  // directory's tokenizer_config.json; bos/eos tokens from that config either way.
  static absl::StatusOr<ChatTemplate> ForModelDir(const std::string& model_dir, const std::string& override_path);

  // `messages` is a list of {"role", "content", ...} objects; `extra` (an object) adds
  // variables such as "tools" or "enable_thinking".
  absl::StatusOr<std::string> Apply(const Json& messages, bool add_generation_prompt,
                                    const Json& extra = Json::object()) const;

 private:
  ChatTemplate() = default;
  std::shared_ptr<const NodeList> nodes_;
  std::string bos_token_, eos_token_;
};

}  // namespace splitspec::chat_template

#endif  // SPLITSPEC_COMMON_ENGINE_CHAT_TEMPLATE_CHAT_TEMPLATE_H_
