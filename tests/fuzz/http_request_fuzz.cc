// Fuzz target: an OpenAI-style HTTP request body (router/http/openai_protocol.h), the first byte
// choosing the endpoint. Every body parses into a request within the limits or into an OpenAI
// error whose JSON serialises (the server sends it back as it is).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "router/http/openai_protocol.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace splitspec::router::http;  // NOLINT: one target over one header
  if (size == 0) return 0;
  const Endpoint endpoint = data[0] % 2 == 0 ? Endpoint::kCompletions : Endpoint::kChatCompletions;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  ProtocolLimits limits;
  limits.model_name = "target";
  limits.default_max_tokens = 16;
  limits.max_tokens_limit = 4096;
  const ParseResult result = ParseRequest(endpoint, body, limits);
  if (!result.request.has_value()) {
    FUZZ_CHECK(result.error.http_status >= 400 && result.error.http_status < 600);
    FUZZ_CHECK(!result.error.message.empty());
    // Replacing invalid UTF-8 keeps a bad byte in a parameter name from throwing here.
    const std::string json = result.error.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    FUZZ_CHECK(!json.empty());
    return 0;
  }
  const ParsedRequest& r = *result.request;
  FUZZ_CHECK(r.endpoint == endpoint);
  FUZZ_CHECK(r.max_tokens >= 1 && r.max_tokens <= limits.max_tokens_limit);
  FUZZ_CHECK(std::isfinite(r.sampling.temperature) && r.sampling.temperature >= 0);
  FUZZ_CHECK(r.sampling.top_p > 0 && r.sampling.top_p <= 1);
  FUZZ_CHECK(r.stop.size() <= 4);
  if (endpoint == Endpoint::kChatCompletions) FUZZ_CHECK(r.messages.is_array() && !r.messages.empty());
  if (r.prompt_ids.has_value()) FUZZ_CHECK(!r.prompt_ids->empty());
  return 0;
}
