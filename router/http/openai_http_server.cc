// OpenAI HTTP edge on cpp-httplib (see openai_http_server.h).
#include "router/http/openai_http_server.h"

#include <csignal>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "httplib.h"
#include "router/api_key.h"
#include "router/service/text_stream.h"

namespace splitspec::router::http {
namespace {

using Json = nlohmann::json;

constexpr char kJson[] = "application/json";
// How long a handler waits for a whole response before committing to a chunked body with
// keep-alives (during which a disconnect cannot be noticed), and the keep-alive period.
constexpr auto kKeepAlive = std::chrono::seconds(1);

void SendError(httplib::Response& res, const ApiError& error) {
  res.status = error.http_status;
  res.set_content(error.ToJson().dump(-1, ' ', false, Json::error_handler_t::replace), kJson);
}

ApiError Error(int status, const std::string& message, const std::string& type = "invalid_request_error",
               const std::string& code = "") {
  ApiError e;
  e.http_status = status;
  e.message = message;
  e.type = type;
  e.code = code;
  return e;
}

}  // namespace

// One submitted request: its events (filled by the core's loop thread) and its text.
class OpenAiHttpServer::Call {
 public:
  Call(const engine::Tokenizer* tokenizer, const std::vector<int32_t>& prompt, std::vector<std::string> stop)
      : text_(tokenizer, prompt, std::move(stop)) {}

  EventSink Sink(const std::shared_ptr<Call>& self) {
    return [self](const StreamEvent& event) {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->events_.push_back(event);
      self->cv_.notify_one();
    };
  }

  // Events that arrived, waiting up to `timeout` for the first one.
  std::deque<StreamEvent> Wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !events_.empty(); });
    std::deque<StreamEvent> out;
    out.swap(events_);
    return out;
  }

  TextStream& text() { return text_; }
  RequestId id = 0;
  ResponseMeta meta;
  // Accumulated for non-streaming responses.
  std::string whole_text;
  std::optional<StreamEvent> final_event;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  TextStream text_;
};

OpenAiHttpServer::OpenAiHttpServer(RouterCore* core, const engine::Tokenizer* tokenizer,
                                   const chat_template::ChatTemplate* chat_template, RouterMetrics* metrics,
                                   OpenAiServerOptions options)
    : core_(core), tokenizer_(tokenizer), chat_template_(chat_template), metrics_(metrics),
      options_(std::move(options)) {}

OpenAiHttpServer::~OpenAiHttpServer() { Stop(); }

void OpenAiHttpServer::Register() {
  httplib::Server& server = *server_;
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (ApiKeyAccepts(options_.api_key, req.get_header_value("Authorization"))) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    SendError(res, Error(401, "invalid or missing API key (Authorization: Bearer ...)", "invalid_request_error",
                         "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", kJson); });
  server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(ModelsResponse(options_.limits.model_name, std::time(nullptr)).dump(), kJson);
  });

  auto generate = [this](Endpoint endpoint) {
    return [this, endpoint](const httplib::Request& req, httplib::Response& res) {
      const double arrival = metrics_ != nullptr ? metrics_->clock()->NowSeconds() : 0.0;
      ParseResult parsed = ParseRequest(endpoint, req.body, options_.limits);
      if (!parsed.request) return SendError(res, parsed.error);
      ParsedRequest& request = *parsed.request;

      // The prompt's token ids.
      std::vector<int32_t> prompt;
      if (endpoint == Endpoint::kChatCompletions) {
        if (chat_template_ == nullptr) {
          return SendError(res, Error(400, "this model has no chat template (start the router with --chat-template FILE)"));
        }
        absl::StatusOr<std::string> rendered = chat_template_->Apply(request.messages, /*add_generation_prompt=*/true);
        if (!rendered.ok()) return SendError(res, Error(400, std::string(rendered.status().message())));
        prompt = tokenizer_->Encode(*rendered, /*add_bos=*/false);  // the template writes its own BOS
      } else if (request.prompt_ids) {
        prompt = *request.prompt_ids;
      } else {
        prompt = tokenizer_->Encode(request.prompt_text, /*add_bos=*/true);
      }
      if (prompt.empty()) return SendError(res, Error(400, "the prompt is empty"));
      for (int32_t id : prompt) {
        if (id >= tokenizer_->vocab_size()) {
          return SendError(res, Error(400, absl::StrCat("token id ", id, " is outside the vocabulary")));
        }
      }
      if (absl::Status s = engine::ValidateSamplingParams(request.sampling); !s.ok()) {
        return SendError(res, Error(400, std::string(s.message())));
      }

      GenerateRequest core_request;
      core_request.prompt = prompt;
      core_request.max_tokens = request.max_tokens;
      core_request.stop = request.stop;
      core_request.sampling = request.sampling;
      auto call = std::make_shared<Call>(tokenizer_, prompt, request.stop);
      call->meta.id = absl::StrFormat("%s-%016x", endpoint == Endpoint::kCompletions ? "cmpl" : "chatcmpl",
                                      next_id_.fetch_add(1) * 0x9E3779B97F4A7C15ull);
      call->meta.created = std::time(nullptr);
      call->meta.model = request.model;
      EventSink sink = call->Sink(call);
      if (metrics_ != nullptr) {
        metrics_->RecordSubmitted();
        sink = metrics_->WrapSink(std::move(sink), arrival);
      }
      absl::StatusOr<RequestId> id = core_->Submit(std::move(core_request), std::move(sink));
      if (!id.ok()) {
        if (metrics_ != nullptr) metrics_->RecordRejected(/*was_submitted=*/true);
        return SendError(res, ErrorFromStatus(id.status()));
      }
      call->id = *id;
      if (request.stream) return Stream(call, request, res);
      Respond(call, endpoint, res);
    };
  };
  server.Post("/v1/completions", generate(Endpoint::kCompletions));
  server.Post("/v1/chat/completions", generate(Endpoint::kChatCompletions));
}

void OpenAiHttpServer::Respond(const std::shared_ptr<Call>& call, Endpoint endpoint, httplib::Response& res) {
  auto absorb = [call](std::deque<StreamEvent> events) {
    for (const StreamEvent& event : events) {
      call->whole_text += call->text().Add(event.tokens);
      if (event.finished) {
        call->final_event = event;
        call->whole_text += call->text().Flush();
        return true;
      }
    }
    return false;
  };
  auto final_body = [call, endpoint]() -> std::pair<int, Json> {
    const StreamEvent& event = *call->final_event;
    if (event.finish_reason == FinishReason::kError || event.finish_reason == FinishReason::kCancelled) {
      const ApiError error = ErrorFromStatus(event.status);
      return {error.http_status, error.ToJson()};
    }
    return {200, CompletionResponse(endpoint, call->meta, call->whole_text, event.finish_reason, event.usage)};
  };
  const auto deadline = std::chrono::steady_clock::now() + kKeepAlive;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (absorb(call->Wait(std::max(left, std::chrono::milliseconds(1))))) {
      const auto [status, body] = final_body();
      res.status = status;
      res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), kJson);
      return;
    }
  }
  // Still running: commit to 200 and a chunked body whose leading spaces (valid before JSON)
  // are the keep-alives that reveal a client that went away.
  RouterCore* core = core_;
  res.set_chunked_content_provider(kJson, [call, core, absorb, final_body](size_t, httplib::DataSink& sink) {
    while (!absorb(call->Wait(kKeepAlive))) {
      if (!sink.write(" ", 1)) {
        (void)core->Cancel(call->id);  // NOT_FOUND if it just finished: nothing to do
        return false;
      }
    }
    const std::string body = final_body().second.dump(-1, ' ', false, Json::error_handler_t::replace);
    sink.write(body.data(), body.size());
    sink.done();
    return true;
  });
}

void OpenAiHttpServer::Stream(const std::shared_ptr<Call>& call, const ParsedRequest& request, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  RouterCore* core = core_;
  const Endpoint endpoint = request.endpoint;
  const bool usage = request.include_usage;
  res.set_chunked_content_provider("text/event-stream", [call, core, endpoint, usage](size_t, httplib::DataSink& sink) {
    auto write = [&sink](const std::string& data) { return sink.write(data.data(), data.size()); };
    auto event = [&](const std::string& text, bool role, FinishReason finish) {
      return write(SseEvent(StreamChunk(endpoint, call->meta, text, role, finish, usage)));
    };
    auto gone = [&] {
      (void)core->Cancel(call->id);  // NOT_FOUND if it just finished: nothing to do
      return false;
    };
    if (endpoint == Endpoint::kChatCompletions && !event("", true, FinishReason::kNone)) return gone();
    while (true) {
      std::deque<StreamEvent> events = call->Wait(kKeepAlive);
      if (events.empty() && !write(": keep-alive\n\n")) return gone();
      for (const StreamEvent& e : events) {
        std::string delta = call->text().Add(e.tokens);
        if (!e.finished) {
          if (!delta.empty() && !event(delta, false, FinishReason::kNone)) return gone();
          continue;
        }
        if (e.finish_reason == FinishReason::kError || e.finish_reason == FinishReason::kCancelled) {
          write(SseEvent(ErrorFromStatus(e.status).ToJson()));
        } else {
          delta += call->text().Flush();
          if (endpoint == Endpoint::kChatCompletions) {
            if (!delta.empty()) event(delta, false, FinishReason::kNone);
            event("", false, e.finish_reason);
          } else {
            event(delta, false, e.finish_reason);
          }
          if (usage) write(SseEvent(UsageChunk(endpoint, call->meta, e.usage)));
        }
        write(kSseDone);
        sink.done();
        return true;
      }
    }
  });
}

absl::Status OpenAiHttpServer::Start() {
  if (server_ != nullptr) return absl::FailedPreconditionError("the HTTP server is already started");
  if (tokenizer_ == nullptr) return absl::FailedPreconditionError("the OpenAI API needs a tokenizer");
  // A write to a client that went away must be an error return, not a process-killing SIGPIPE
  // (cpp-httplib sends without MSG_NOSIGNAL).
  std::signal(SIGPIPE, SIG_IGN);
  server_ = std::make_unique<httplib::Server>();
  const int n_threads = options_.n_threads;
  server_->new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  server_->set_socket_options([](auto sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_->set_payload_max_length(16 << 20);
  Register();
  int port = options_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(options_.host);
  } else if (!server_->bind_to_port(options_.host, port)) {
    port = -1;
  }
  if (port <= 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("HTTP server: cannot bind ", options_.host, ":", options_.port));
  }
  port_.store(port);
  httplib::Server* raw = server_.get();
  listen_returned_.store(false);
  thread_ = std::thread([this, raw] {
    raw->listen_after_bind();
    listen_returned_.store(true);
  });
  // stop() is a no-op until the listen loop runs: wait for it (or for its failure).
  while (!raw->is_running() && !listen_returned_.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
  if (!raw->is_running()) {
    thread_.join();
    server_.reset();
    return absl::InternalError("HTTP server: the listen loop failed to start");
  }
  return absl::OkStatus();
}

void OpenAiHttpServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace splitspec::router::http
