// The public Router gRPC service over RouterCore: Generate (server streaming: token ids and
// text deltas, then a final message with finish reason and usage) and GetServerInfo; plus
// RouterLoop, the thread that drives the core's steps and drains it on shutdown.
//
// Thread-safety: RouterService handlers run on gRPC's threads and only use the core's
// thread-safe entry points (Submit, Cancel, Snapshot); RouterLoop owns the loop thread.
#ifndef SPLITSPEC_ROUTER_SERVICE_ROUTER_SERVICE_H_
#define SPLITSPEC_ROUTER_SERVICE_ROUTER_SERVICE_H_

#include <atomic>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "common/engine/tokenizer/tokenizer.h"
#include "router/router_core.h"
#include "router/service/router_metrics.h"
#include "splitspec/v1/router.grpc.pb.h"

namespace splitspec::router {

struct RouterServiceOptions {
  int32_t default_max_tokens = 128;  // for requests with max_tokens = 0
  std::string model_name;            // the verifier's, for GetServerInfo
  int32_t vocab_size = 0;
  // Not owned; null = no metrics. Its hooks must already be installed in the core's options.
  RouterMetrics* metrics = nullptr;
  // Non-empty: Generate and GetServerInfo need "authorization: Bearer <api_key>" metadata and
  // answer UNAUTHENTICATED otherwise (health is a separate service and stays open).
  std::string api_key;
};

class RouterService final : public v1::Router::Service {
 public:
  // `core` and `tokenizer` are not owned. Without a tokenizer only token-id prompts work and
  // responses carry no text.
  RouterService(RouterCore* core, const engine::Tokenizer* tokenizer, RouterServiceOptions options)
      : core_(core), tokenizer_(tokenizer), options_(std::move(options)) {}

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;
  grpc::Status GetServerInfo(grpc::ServerContext* context, const v1::GetServerInfoRequest* request,
                             v1::ServerInfo* response) override;

 private:
  // OK, or UNAUTHENTICATED when an API key is set and the call does not carry it.
  grpc::Status Authorize(const grpc::ServerContext& context) const;
  RouterCore* core_;
  const engine::Tokenizer* tokenizer_;
  RouterServiceOptions options_;
};

// Runs RouterCore::RunStep on its own thread until Drain.
class RouterLoop {
 public:
  // `metrics` (optional, not owned) is told when the loop goes idle.
  explicit RouterLoop(RouterCore* core, RouterMetrics* metrics = nullptr)
      : core_(core), metrics_(metrics) {}
  ~RouterLoop();
  void Start();
  // Refuses new requests, lets queued and running ones finish for up to `timeout`, then ends
  // the rest with UNAVAILABLE and stops the thread. Idempotent.
  void Drain(absl::Duration timeout);

 private:
  void Run();

  RouterCore* core_;
  RouterMetrics* metrics_;
  std::thread thread_;
  std::atomic<bool> abort_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_SERVICE_ROUTER_SERVICE_H_
