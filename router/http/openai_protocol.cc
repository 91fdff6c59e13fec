// OpenAI request parsing and response building (see openai_protocol.h).
#include "router/http/openai_protocol.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace splitspec::router::http {
namespace {

using Json = nlohmann::json;

constexpr auto kReplaceInvalid = Json::error_handler_t::replace;

ApiError BadParam(const std::string& param, const std::string& message) {
  ApiError e;
  e.message = message;
  e.param = param;
  return e;
}

// Fields that are accepted only at the value that means "off".
bool IsNeutral(const std::string& key, const Json& v) {
  if (v.is_null()) return true;
  if (key == "presence_penalty" || key == "frequency_penalty") return v.is_number() && v.get<double>() == 0.0;
  if (key == "logprobs") return v.is_boolean() && !v.get<bool>();
  if (key == "echo") return v.is_boolean() && !v.get<bool>();
  if (key == "best_of") return v.is_number_integer() && v.get<int64_t>() == 1;
  if (key == "logit_bias") return v.is_object() && v.empty();
  if (key == "parallel_tool_calls") return v.is_boolean();
  return false;
}

std::optional<ApiError> ParseSampling(const Json& body, ParsedRequest* out) {
  if (body.contains("temperature") && !body["temperature"].is_null()) {
    const Json& t = body["temperature"];
    if (!t.is_number() || t.get<double>() < 0.0 || t.get<double>() > 2.0 || std::isnan(t.get<double>())) {
      return BadParam("temperature", "temperature must be a number between 0 and 2");
    }
    out->sampling.temperature = t.get<float>();
  } else {
    out->sampling.temperature = 1.0f;  // OpenAI's default
  }
  if (body.contains("top_p") && !body["top_p"].is_null()) {
    const Json& p = body["top_p"];
    if (!p.is_number() || !(p.get<double>() > 0.0 && p.get<double>() <= 1.0)) {
      return BadParam("top_p", "top_p must be a number in (0, 1]");
    }
    out->sampling.top_p = p.get<float>();
  }
  if (body.contains("top_k") && !body["top_k"].is_null()) {
    const Json& k = body["top_k"];
    if (!k.is_number_integer() || k.get<int64_t>() < -1 || k.get<int64_t>() > (1 << 24)) {
      return BadParam("top_k", "top_k must be an integer >= 0 (0 or -1: no cut)");
    }
    out->sampling.top_k = std::max<int>(0, k.get<int>());
  }
  if (body.contains("seed") && !body["seed"].is_null()) {
    if (!body["seed"].is_number_integer()) return BadParam("seed", "seed must be an integer");
    out->sampling.seed = static_cast<uint64_t>(body["seed"].get<int64_t>());
  }
  return std::nullopt;
}

std::optional<ApiError> ParseStop(const Json& body, ParsedRequest* out) {
  if (!body.contains("stop") || body["stop"].is_null()) return std::nullopt;
  const Json& stop = body["stop"];
  if (stop.is_string()) {
    out->stop.push_back(stop.get<std::string>());
  } else if (stop.is_array() && stop.size() <= 4) {
    for (const Json& s : stop) {
      if (!s.is_string()) return BadParam("stop", "stop must be a string or a list of up to 4 strings");
      out->stop.push_back(s.get<std::string>());
    }
  } else {
    return BadParam("stop", "stop must be a string or a list of up to 4 strings");
  }
  for (const std::string& s : out->stop) {
    if (s.empty()) return BadParam("stop", "stop strings must not be empty");
  }
  return std::nullopt;
}

std::optional<ApiError> ParseMaxTokens(const Json& body, const ProtocolLimits& limits, ParsedRequest* out) {
  out->max_tokens = limits.default_max_tokens;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!body.contains(key) || body[key].is_null()) continue;
    const Json& v = body[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > limits.max_tokens_limit) {
      return BadParam(key, absl::StrCat(key, " must be an integer between 1 and ", limits.max_tokens_limit));
    }
    out->max_tokens = v.get<int32_t>();
  }
  return std::nullopt;
}

std::optional<ApiError> ParsePrompt(const Json& body, ParsedRequest* out) {
  if (!body.contains("prompt")) return BadParam("prompt", "prompt is required");
  const Json& prompt = body["prompt"];
  if (prompt.is_string()) {
    out->prompt_text = prompt.get<std::string>();
    return std::nullopt;
  }
  if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) {
    out->prompt_text = prompt[0].get<std::string>();
    return std::nullopt;
  }
  if (prompt.is_array() && !prompt.empty() && prompt[0].is_number_integer()) {
    std::vector<int32_t> ids;
    for (const Json& id : prompt) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return BadParam("prompt", "a token-id prompt must be a list of non-negative integers");
      }
      ids.push_back(id.get<int32_t>());
    }
    out->prompt_ids = std::move(ids);
    return std::nullopt;
  }
  return BadParam("prompt", "prompt must be a string or a list of token ids (batches of prompts are not supported)");
}

std::optional<ApiError> ParseMessages(const Json& body, ParsedRequest* out) {
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
    return BadParam("messages", "messages must be a non-empty list");
  }
  out->messages = nlohmann::ordered_json::array();
  for (const Json& message : body["messages"]) {
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      return BadParam("messages", "every message needs a string role");
    }
    const std::string role = message["role"].get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool") {
      return BadParam("messages", absl::StrCat("unsupported message role '", role, "'"));
    }
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    // Templates know "system"; OpenAI's newer "developer" role means the same.
    m["role"] = role == "developer" ? "system" : role;
    const Json content = message.contains("content") ? message["content"] : Json();
    if (content.is_string()) {
      m["content"] = content.get<std::string>();
    } else if (content.is_array()) {
      std::string text;
      for (const Json& part : content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
          return BadParam("messages", "only text content parts are supported");
        }
        text += part["text"].get<std::string>();
      }
      m["content"] = text;
    } else if (content.is_null() && role == "assistant") {
      m["content"] = "";
    } else {
      return BadParam("messages", "message content must be a string or a list of text parts");
    }
    for (const auto& [key, value] : message.items()) {
      if (key == "role" || key == "content") continue;
      if (key == "name" || key == "tool_call_id" || key == "tool_calls" || key == "reasoning_content") {
        m[key] = value;
        continue;
      }
      return BadParam("messages", absl::StrCat("unsupported message field '", key, "'"));
    }
    out->messages.push_back(std::move(m));
  }
  return std::nullopt;
}

}  // namespace

Json ApiError::ToJson() const {
  return Json{{"error",
               {{"message", message},
                {"type", type},
                {"param", param.empty() ? Json() : Json(param)},
                {"code", code.empty() ? Json() : Json(code)}}}};
}

ParseResult ParseRequest(Endpoint endpoint, const std::string& body_text, const ProtocolLimits& limits) {
  ParseResult result;
  const Json body = Json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    result.error = BadParam("", "the request body must be a JSON object");
    return result;
  }
  static const char* const kCommon[] = {"model", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "n",
                                        "stream", "stream_options", "user"};
  for (const auto& [key, value] : body.items()) {
    bool known = std::find(std::begin(kCommon), std::end(kCommon), key) != std::end(kCommon);
    if (endpoint == Endpoint::kCompletions) known = known || key == "prompt";
    if (endpoint == Endpoint::kChatCompletions) known = known || key == "messages" || key == "max_completion_tokens";
    if (!known && !IsNeutral(key, value)) {
      result.error = BadParam(key, absl::StrCat("parameter '", key, "' is not supported"));
      return result;
    }
  }
  ParsedRequest request;
  request.endpoint = endpoint;
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) {
      result.error = BadParam("model", "model must be a string");
      return result;
    }
    request.model = body["model"].get<std::string>();
    if (!request.model.empty() && request.model != limits.model_name) {
      result.error = BadParam("model", absl::StrCat("the model '", request.model, "' does not exist; this server serves '",
                                                    limits.model_name, "'"));
      result.error.http_status = 404;
      result.error.code = "model_not_found";
      return result;
    }
  }
  request.model = limits.model_name;
  if (body.contains("n") && !body["n"].is_null() && !(body["n"].is_number_integer() && body["n"].get<int64_t>() == 1)) {
    result.error = BadParam("n", "only n = 1 is supported");
    return result;
  }
  if (body.contains("stream") && !body["stream"].is_null()) {
    if (!body["stream"].is_boolean()) {
      result.error = BadParam("stream", "stream must be a boolean");
      return result;
    }
    request.stream = body["stream"].get<bool>();
  }
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const Json& options = body["stream_options"];
    if (!request.stream) {
      result.error = BadParam("stream_options", "stream_options is only allowed with stream: true");
      return result;
    }
    if (!options.is_object()) {
      result.error = BadParam("stream_options", "stream_options must be an object");
      return result;
    }
    for (const auto& [key, value] : options.items()) {
      if (key != "include_usage" || !value.is_boolean()) {
        result.error = BadParam("stream_options", absl::StrCat("unsupported stream option '", key, "'"));
        return result;
      }
      request.include_usage = value.get<bool>();
    }
  }
  std::optional<ApiError> error = ParseMaxTokens(body, limits, &request);
  if (!error) error = ParseSampling(body, &request);
  if (!error) error = ParseStop(body, &request);
  if (!error) error = endpoint == Endpoint::kCompletions ? ParsePrompt(body, &request) : ParseMessages(body, &request);
  if (error) {
    result.error = *error;
    return result;
  }
  result.request = std::move(request);
  return result;
}

const char* FinishReasonString(FinishReason reason) {
  return reason == FinishReason::kLength ? "length" : "stop";
}

Json UsageJson(const Usage& usage) {
  const double acceptance = usage.drafted_tokens > 0 ? static_cast<double>(usage.accepted_tokens) / usage.drafted_tokens : 0.0;
  return Json{{"prompt_tokens", usage.prompt_tokens},
              {"completion_tokens", usage.completion_tokens},
              {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
              {"speculative_decoding",
               {{"drafted_tokens", usage.drafted_tokens},
                {"accepted_tokens", usage.accepted_tokens},
                {"acceptance_rate", acceptance},
                {"verify_steps", usage.steps}}}};
}

namespace {

Json Envelope(Endpoint endpoint, const ResponseMeta& meta, bool chunk) {
  const char* object = endpoint == Endpoint::kCompletions ? "text_completion"
                       : chunk                            ? "chat.completion.chunk"
                                                          : "chat.completion";
  return Json{{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

}  // namespace

Json CompletionResponse(Endpoint endpoint, const ResponseMeta& meta, const std::string& text, FinishReason reason,
                        const Usage& usage) {
  Json response = Envelope(endpoint, meta, false);
  Json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", FinishReasonString(reason)}};
  if (endpoint == Endpoint::kCompletions) {
    choice["text"] = text;
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  }
  response["choices"] = Json::array({choice});
  response["usage"] = UsageJson(usage);
  return response;
}

Json StreamChunk(Endpoint endpoint, const ResponseMeta& meta, const std::string& text, bool role_chunk,
                 FinishReason finish, bool usage_field) {
  Json chunk = Envelope(endpoint, meta, true);
  Json choice = {{"index", 0}, {"logprobs", nullptr},
                 {"finish_reason", finish == FinishReason::kNone ? Json() : Json(FinishReasonString(finish))}};
  if (endpoint == Endpoint::kCompletions) {
    choice["text"] = text;
  } else if (role_chunk) {
    choice["delta"] = {{"role", "assistant"}, {"content", ""}};
  } else if (!text.empty() || finish == FinishReason::kNone) {
    choice["delta"] = {{"content", text}};
  } else {
    choice["delta"] = Json::object();
  }
  chunk["choices"] = Json::array({choice});
  if (usage_field) chunk["usage"] = nullptr;
  return chunk;
}

Json UsageChunk(Endpoint endpoint, const ResponseMeta& meta, const Usage& usage) {
  Json chunk = Envelope(endpoint, meta, true);
  chunk["choices"] = Json::array();
  chunk["usage"] = UsageJson(usage);
  return chunk;
}

std::string SseEvent(const Json& data) { return absl::StrCat("data: ", data.dump(-1, ' ', false, kReplaceInvalid), "\n\n"); }

Json ModelsResponse(const std::string& model_name, int64_t created) {
  return Json{{"object", "list"},
              {"data", Json::array({{{"id", model_name}, {"object", "model"}, {"created", created}, {"owned_by", "splitspec"}}})}};
}

ApiError ErrorFromStatus(const absl::Status& status) {
  ApiError e;
  e.message = std::string(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition: e.http_status = 400; break;
    case absl::StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      break;
    case absl::StatusCode::kUnavailable:
      e.http_status = 503;
      e.type = "server_error";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

absl::StatusOr<std::string> ReadApiKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream text;
  text << in.rdbuf();
  std::string key = text.str();
  const size_t begin = key.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return absl::InvalidArgumentError(absl::StrCat(path, " holds no API key"));
  key = key.substr(begin, key.find_last_not_of(" \t\r\n") - begin + 1);
  return key;
}

}  // namespace splitspec::router::http
