// The OpenAI-compatible HTTP edge of the router: POST /v1/completions, POST
// /v1/chat/completions (JSON, or server-sent events with stream: true), GET /v1/models and
// GET /health, on its own port (cpp-httplib), submitting to the same RouterCore as the gRPC
// service. A thin adapter: parsing and response shapes live in openai_protocol.h.
//
// Client disconnects cancel the request: streams notice on their next write, and every
// response that waits writes a keep-alive (an SSE comment, or a space before a JSON body)
// each second, so a client that went away is found within about two seconds. (A JSON response
// still running after one second is thereby committed to status 200: a worker failure after
// that point arrives as an OpenAI error body with status 200.)
// Thread-safety: Start/Stop from the owning thread; handlers run on the server's pool and use
// only RouterCore's thread-safe entry points and const tokenizer / template methods.
#ifndef SPLITSPEC_ROUTER_HTTP_OPENAI_HTTP_SERVER_H_
#define SPLITSPEC_ROUTER_HTTP_OPENAI_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "common/engine/chat_template/chat_template.h"
#include "common/engine/tokenizer/tokenizer.h"
#include "router/http/openai_protocol.h"
#include "router/router_core.h"
#include "router/service/router_metrics.h"

namespace httplib {
class Server;
struct Response;
}  // namespace httplib

namespace splitspec::router::http {

struct OpenAiServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;          // 0 picks a free port; port() reports it after Start
  int n_threads = 64;    // each in-flight request holds one while it runs
  std::string api_key;   // non-empty: requests need "Authorization: Bearer <api_key>"
  ProtocolLimits limits;
};

class OpenAiHttpServer {
 public:
  // Not owned, must outlive the server: `core`, `tokenizer` (required), `chat_template`
  // (null: chat completions answer 400), `metrics` (optional).
  OpenAiHttpServer(RouterCore* core, const engine::Tokenizer* tokenizer,
                   const chat_template::ChatTemplate* chat_template, RouterMetrics* metrics,
                   OpenAiServerOptions options);
  ~OpenAiHttpServer();
  OpenAiHttpServer(const OpenAiHttpServer&) = delete;
  OpenAiHttpServer& operator=(const OpenAiHttpServer&) = delete;

  absl::Status Start();
  void Stop();  // idempotent; requests still streaming end when the core finishes them
  int port() const { return port_.load(); }

 private:
  class Call;
  void Register();
  // Sends the response of a submitted request: as SSE chunks, or as one JSON body.
  void Stream(const std::shared_ptr<Call>& call, const ParsedRequest& request, httplib::Response& res);
  void Respond(const std::shared_ptr<Call>& call, Endpoint endpoint, httplib::Response& res);

  RouterCore* core_;
  const engine::Tokenizer* tokenizer_;
  const chat_template::ChatTemplate* chat_template_;
  RouterMetrics* metrics_;
  const OpenAiServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<int> port_{0};
  std::atomic<bool> listen_returned_{false};
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace splitspec::router::http

#endif  // SPLITSPEC_ROUTER_HTTP_OPENAI_HTTP_SERVER_H_
