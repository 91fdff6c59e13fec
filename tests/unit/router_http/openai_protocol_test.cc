// OpenAI request parsing (every supported field reaches the core request; anything
// unsupported is a 400 naming the parameter) and the response / chunk / usage shapes.
#include "router/http/openai_protocol.h"

#include <string>

#include "gtest/gtest.h"

namespace splitspec::router::http {
namespace {

using Json = nlohmann::json;

ProtocolLimits Limits() {
  ProtocolLimits limits;
  limits.model_name = "m";
  limits.default_max_tokens = 32;
  limits.max_tokens_limit = 1000;
  return limits;
}

ParseResult Parse(Endpoint endpoint, const Json& body) { return ParseRequest(endpoint, body.dump(), Limits()); }

TEST(OpenAiProtocolTest, CompletionFieldsReachTheRequest) {
  const ParseResult r = Parse(Endpoint::kCompletions, {{"model", "m"}, {"prompt", "hi"}, {"max_tokens", 7},
                                                       {"temperature", 0.5}, {"top_p", 0.9}, {"seed", 42},
                                                       {"stop", {"a", "b"}}, {"n", 1}, {"stream", true},
                                                       {"stream_options", {{"include_usage", true}}}, {"user", "u"},
                                                       {"presence_penalty", 0}, {"logprobs", nullptr}});
  ASSERT_TRUE(r.request.has_value()) << r.error.message;
  EXPECT_EQ(r.request->prompt_text, "hi");
  EXPECT_EQ(r.request->max_tokens, 7);
  EXPECT_FLOAT_EQ(r.request->sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.request->sampling.top_p, 0.9f);
  EXPECT_EQ(r.request->sampling.seed, 42u);
  EXPECT_EQ(r.request->stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.request->stream);
  EXPECT_TRUE(r.request->include_usage);
}

TEST(OpenAiProtocolTest, DefaultsAndTokenPrompts) {
  const ParseResult r = Parse(Endpoint::kCompletions, {{"prompt", {1, 2, 3}}});
  ASSERT_TRUE(r.request.has_value()) << r.error.message;
  EXPECT_EQ(*r.request->prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.request->max_tokens, 32);
  EXPECT_FLOAT_EQ(r.request->sampling.temperature, 1.0f);  // OpenAI's default
  EXPECT_EQ(r.request->model, "m");
}

TEST(OpenAiProtocolTest, ChatMessagesAreNormalized) {
  const ParseResult r = Parse(Endpoint::kChatCompletions,
                              {{"messages", {{{"role", "developer"}, {"content", "be brief"}},
                                             {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}},
                                                                             {{"type", "text"}, {"text", "b"}}}}},
                                             {{"role", "assistant"}, {"content", nullptr}}}},
                               {"max_completion_tokens", 5}});
  ASSERT_TRUE(r.request.has_value()) << r.error.message;
  EXPECT_EQ(r.request->messages[0]["role"], "system");
  EXPECT_EQ(r.request->messages[1]["content"], "ab");
  EXPECT_EQ(r.request->messages[2]["content"], "");
  EXPECT_EQ(r.request->max_tokens, 5);
}

TEST(OpenAiProtocolTest, UnsupportedInputIs400NamingTheParameter) {
  struct Case {
    Endpoint endpoint;
    Json body;
    std::string param;
  };
  const Json chat_messages = Json::array({{{"role", "user"}, {"content", "x"}}});
  const Case cases[] = {
      {Endpoint::kCompletions, {{"prompt", "x"}, {"n", 2}}, "n"},
      {Endpoint::kCompletions, {{"prompt", "x"}, {"logprobs", 3}}, "logprobs"},
      {Endpoint::kCompletions, {{"prompt", "x"}, {"frequency_penalty", 0.5}}, "frequency_penalty"},
      {Endpoint::kCompletions, {{"prompt", "x"}, {"tools", Json::array()}}, "tools"},
      {Endpoint::kCompletions, {{"prompt", {"a", "b"}}}, "prompt"},
      {Endpoint::kCompletions, {{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens"},
      {Endpoint::kCompletions, {{"prompt", "x"}, {"max_tokens", 5000}}, "max_tokens"},
      {Endpoint::kCompletions, {{"prompt", "x"}, {"temperature", -1}}, "temperature"},
      {Endpoint::kCompletions, {{"prompt", "x"}, {"top_p", 0}}, "top_p"},
      {Endpoint::kCompletions, {{"prompt", "x"}, {"stop", {"a", "b", "c", "d", "e"}}}, "stop"},
      {Endpoint::kCompletions, {{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {Endpoint::kCompletions, {{"messages", chat_messages}}, "messages"},
      {Endpoint::kCompletions, Json::object(), "prompt"},
      {Endpoint::kChatCompletions, {{"messages", Json::array()}}, "messages"},
      {Endpoint::kChatCompletions, {{"messages", {{{"role", "robot"}, {"content", "x"}}}}}, "messages"},
      {Endpoint::kChatCompletions, {{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}}, "messages"},
      {Endpoint::kChatCompletions, {{"messages", chat_messages}, {"response_format", {{"type", "json_object"}}}}, "response_format"},
  };
  for (const Case& c : cases) {
    const ParseResult r = Parse(c.endpoint, c.body);
    EXPECT_FALSE(r.request.has_value()) << c.body.dump();
    EXPECT_EQ(r.error.http_status, 400) << c.body.dump();
    EXPECT_EQ(r.error.param, c.param) << c.body.dump() << ": " << r.error.message;
    const Json json = r.error.ToJson();
    EXPECT_EQ(json["error"]["type"], "invalid_request_error");
    EXPECT_TRUE(json["error"]["message"].is_string());
  }
  EXPECT_FALSE(ParseRequest(Endpoint::kCompletions, "{not json", Limits()).request.has_value());
  const ParseResult wrong_model = Parse(Endpoint::kCompletions, {{"prompt", "x"}, {"model", "other"}});
  EXPECT_EQ(wrong_model.error.http_status, 404);
  EXPECT_EQ(wrong_model.error.code, "model_not_found");
}

TEST(OpenAiProtocolTest, ResponseShapes) {
  const ResponseMeta meta{"chatcmpl-1", 100, "m"};
  Usage usage;
  usage.prompt_tokens = 3;
  usage.completion_tokens = 4;
  usage.drafted_tokens = 8;
  usage.accepted_tokens = 6;
  usage.steps = 2;
  const Json chat = CompletionResponse(Endpoint::kChatCompletions, meta, "hello", FinishReason::kEos, usage);
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chat["usage"]["total_tokens"], 7);
  EXPECT_EQ(chat["usage"]["speculative_decoding"]["accepted_tokens"], 6);
  EXPECT_DOUBLE_EQ(chat["usage"]["speculative_decoding"]["acceptance_rate"].get<double>(), 0.75);

  const Json text = CompletionResponse(Endpoint::kCompletions, meta, "x", FinishReason::kLength, usage);
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "x");
  EXPECT_EQ(text["choices"][0]["finish_reason"], "length");

  const Json role = StreamChunk(Endpoint::kChatCompletions, meta, "", true, FinishReason::kNone, true);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(role["usage"].is_null());
  const Json last = StreamChunk(Endpoint::kChatCompletions, meta, "", false, FinishReason::kStopString, false);
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(last.contains("usage"));
  const Json usage_chunk = UsageChunk(Endpoint::kChatCompletions, meta, usage);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 4);
  EXPECT_EQ(SseEvent(Json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(ErrorFromStatus(absl::ResourceExhaustedError("full")).http_status, 429);
  EXPECT_EQ(ErrorFromStatus(absl::UnavailableError("down")).http_status, 503);
}

}  // namespace
}  // namespace splitspec::router::http
