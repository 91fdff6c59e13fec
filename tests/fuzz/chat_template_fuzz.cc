// Fuzz target: a chat template (the Jinja source a model's tokenizer_config.json carries).
// Parsing returns an error or a template that renders a conversation to text or to an error,
// in bounded time and memory (libFuzzer's -timeout and -rss_limit_mb catch a runaway loop).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/engine/chat_template/chat_template.h"
#include "nlohmann/json.hpp"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using splitspec::chat_template::ChatTemplate;
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::Create(source, "<s>", "</s>");
  if (!chat.ok()) return 0;
  static const nlohmann::json* messages = new nlohmann::json(nlohmann::json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi {{ there }} {% if %}"},
    {"role": "assistant", "content": "Hello.", "tool_calls": [{"name": "f", "arguments": {"x": 1}}]},
    {"role": "user", "content": ""}
  ])"));
  for (const bool add_generation_prompt : {false, true}) {
    absl::StatusOr<std::string> rendered = chat->Apply(*messages, add_generation_prompt);
    (void)rendered;
  }
  return 0;
}
