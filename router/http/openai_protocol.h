// The OpenAI-compatible HTTP API as data, without sockets: request bodies of
// /v1/completions and /v1/chat/completions parsed and validated into what the router core
// runs, and the response, stream-chunk, usage and error JSON built back.
//
// Supported request fields: model, prompt (string, one-element list of strings, or token ids)
// or messages (system / developer / user / assistant / tool turns; content a string or text
// parts), max_tokens, max_completion_tokens, temperature, top_p, top_k (extension), seed,
// stop (string or up to 4 strings), n = 1, stream, stream_options.include_usage, user, and
// parameters at their neutral values (presence/frequency_penalty 0, logprobs false/null,
// echo false, best_of 1, logit_bias empty). Anything else is a 400 naming the parameter.
#ifndef SPLITSPEC_ROUTER_HTTP_OPENAI_PROTOCOL_H_
#define SPLITSPEC_ROUTER_HTTP_OPENAI_PROTOCOL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "router/request_types.h"

namespace splitspec::router::http {

// An error as OpenAI returns it: HTTP status plus {"error": {message, type, param, code}}.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty = null
  std::string code;   // empty = null
  nlohmann::json ToJson() const;
};

enum class Endpoint { kCompletions, kChatCompletions };

// What the edge knows when parsing: the served model's name and its limits.
struct ProtocolLimits {
  std::string model_name;
  int32_t default_max_tokens = 128;
  int32_t max_tokens_limit = 1 << 20;
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  // Completions: the prompt as text, or as token ids when `prompt_ids` is set.
  std::string prompt_text;
  std::optional<std::vector<int32_t>> prompt_ids;
  // Chat: the messages as the chat template expects them (role, content as a string, and any
  // other fields of the message passed through).
  nlohmann::ordered_json messages;
  int32_t max_tokens = 0;
  std::vector<std::string> stop;
  engine::SamplingParams sampling;
  bool stream = false;
  bool include_usage = false;
};

// Parses `body` (the raw request body) for `endpoint`; a std::variant would be nicer, but the
// error path is rare and explicit this way.
struct ParseResult {
  std::optional<ParsedRequest> request;
  ApiError error;
};
ParseResult ParseRequest(Endpoint endpoint, const std::string& body, const ProtocolLimits& limits);

// "stop" for EOS and stop strings, "length" for max_tokens; others never reach responses.
const char* FinishReasonString(FinishReason reason);

// usage with the extension field "speculative_decoding" {drafted_tokens, accepted_tokens,
// acceptance_rate, verify_steps}.
nlohmann::json UsageJson(const Usage& usage);

// Identity of one response: id ("cmpl-..." / "chatcmpl-..."), creation time, model.
struct ResponseMeta {
  std::string id;
  int64_t created = 0;
  std::string model;
};

// A non-streaming response with the whole text.
nlohmann::json CompletionResponse(Endpoint endpoint, const ResponseMeta& meta, const std::string& text,
                                  FinishReason reason, const Usage& usage);

// One streaming chunk. `role_chunk` is the chat stream's opening chunk (delta {role,
// content: ""}); `finish` (not kNone) ends the choice; `usage_field` adds "usage": null to
// chunks of a stream that asked for include_usage.
nlohmann::json StreamChunk(Endpoint endpoint, const ResponseMeta& meta, const std::string& text, bool role_chunk,
                           FinishReason finish, bool usage_field);
// The usage-only chunk (choices: []) that ends a stream with include_usage.
nlohmann::json UsageChunk(Endpoint endpoint, const ResponseMeta& meta, const Usage& usage);

// "data: <json>\n\n"; and the terminator.
std::string SseEvent(const nlohmann::json& data);
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

// GET /v1/models.
nlohmann::json ModelsResponse(const std::string& model_name, int64_t created);

// The status a core error maps to (RESOURCE_EXHAUSTED 429, UNAVAILABLE 503, INVALID_ARGUMENT
// 400, others 500), as an ApiError.
ApiError ErrorFromStatus(const absl::Status& status);

// The bearer key in `path` (surrounding whitespace dropped); an empty file is an error.
absl::StatusOr<std::string> ReadApiKeyFile(const std::string& path);

}  // namespace splitspec::router::http

#endif  // SPLITSPEC_ROUTER_HTTP_OPENAI_PROTOCOL_H_
