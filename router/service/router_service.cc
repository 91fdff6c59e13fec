// Router gRPC adapter and step-loop thread (see router_service.h).
#include "router/service/router_service.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "common/engine/sampling/seed.h"
#include "common/rpc/convert.h"
#include "common/rpc/status.h"
#include "router/api_key.h"
#include "router/service/text_stream.h"

namespace splitspec::router {
namespace {

// How often a streaming handler with nothing to write checks whether its client went away
// (the sync API has no cancellation callback).
constexpr auto kCancelCheckPeriod = std::chrono::milliseconds(20);

// Events of one request, handed from the loop thread (sink) to the handler thread.
struct EventQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<StreamEvent> events;
};

v1::FinishReason ToProto(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case FinishReason::kEos: return v1::FINISH_REASON_EOS;
    case FinishReason::kStopString: return v1::FINISH_REASON_STOP;
    default: return v1::FINISH_REASON_UNSPECIFIED;
  }
}

void ToProto(const Usage& usage, v1::Usage* proto) {
  proto->set_prompt_tokens(usage.prompt_tokens);
  proto->set_completion_tokens(usage.completion_tokens);
  proto->set_steps(usage.steps);
  proto->set_drafted_tokens(usage.drafted_tokens);
  proto->set_accepted_tokens(usage.accepted_tokens);
}

}  // namespace

grpc::Status RouterService::Authorize(const grpc::ServerContext& context) const {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const absl::string_view offered = it == metadata.end() ? "" : absl::string_view(it->second.data(), it->second.size());
  if (ApiKeyAccepts(options_.api_key, offered)) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or wrong bearer token (authorization metadata)");
}

grpc::Status RouterService::Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                                     grpc::ServerWriter<v1::GenerateResponse>* writer) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return auth;
  RouterMetrics* const metrics = options_.metrics;
  const double arrival = metrics != nullptr ? metrics->clock()->NowSeconds() : 0.0;
  GenerateRequest core_request;
  switch (request->prompt_case()) {
    case v1::GenerateRequest::kTokens:
      core_request.prompt.assign(request->tokens().ids().begin(), request->tokens().ids().end());
      break;
    case v1::GenerateRequest::kText:
      if (tokenizer_ == nullptr) {
        if (metrics != nullptr) metrics->RecordRejected(/*was_submitted=*/false);
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "this router has no tokenizer (--tokenizer); send token ids");
      }
      core_request.prompt = tokenizer_->Encode(request->text(), /*add_bos=*/true);
      break;
    default:
      if (metrics != nullptr) metrics->RecordRejected(/*was_submitted=*/false);
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no prompt: set text or tokens");
  }
  if (request->max_tokens() < 0) {
    if (metrics != nullptr) metrics->RecordRejected(/*was_submitted=*/false);
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "max_tokens must be >= 0 (0 = default)");
  }
  core_request.max_tokens = request->max_tokens() == 0 ? options_.default_max_tokens : request->max_tokens();
  core_request.stop.assign(request->stop().begin(), request->stop().end());
  if (!core_request.stop.empty() && tokenizer_ == nullptr) {
    if (metrics != nullptr) metrics->RecordRejected(/*was_submitted=*/false);
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "stop strings need a tokenizer (--tokenizer)");
  }
  core_request.ignore_eos = request->ignore_eos();
  core_request.sampling = rpc::FromProto(request->sampling());
  // An unseeded sampled request gets its own seed, reported in the final message.
  const bool sampled = !core_request.sampling.greedy();
  if (sampled) {
    core_request.sampling.seed = engine::ChooseSeed(
        request->sampling().has_seed() ? std::optional<uint64_t>(request->sampling().seed()) : std::nullopt);
  }
  const uint64_t seed = core_request.sampling.seed;
  core_request.drafter = request->drafter();
  std::unique_ptr<TextStream> text;
  if (tokenizer_ != nullptr) text = std::make_unique<TextStream>(tokenizer_, core_request.prompt, core_request.stop);

  auto queue = std::make_shared<EventQueue>();
  // The sink may outlive this handler (a final event after we returned): it holds the queue.
  EventSink sink = [queue](const StreamEvent& event) {
    std::lock_guard<std::mutex> lock(queue->mu);
    queue->events.push_back(event);
    queue->cv.notify_one();
  };
  if (metrics != nullptr) {
    metrics->RecordSubmitted();
    sink = metrics->WrapSink(std::move(sink), arrival);
  }
  absl::StatusOr<RequestId> id = core_->Submit(std::move(core_request), std::move(sink));
  if (!id.ok()) {
    if (metrics != nullptr) metrics->RecordRejected(/*was_submitted=*/true);
    return rpc::ToGrpcStatus(id.status());
  }

  while (true) {
    std::deque<StreamEvent> events;
    {
      std::unique_lock<std::mutex> lock(queue->mu);
      queue->cv.wait_for(lock, kCancelCheckPeriod, [&] { return !queue->events.empty(); });
      events.swap(queue->events);
    }
    if (events.empty()) {
      if (context->IsCancelled()) {
        (void)core_->Cancel(*id);  // NOT_FOUND if it finished meanwhile: nothing to do
        return grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled");
      }
      continue;
    }
    for (const StreamEvent& event : events) {
      v1::GenerateResponse response;
      response.mutable_token_ids()->Add(event.tokens.begin(), event.tokens.end());
      if (text != nullptr) response.set_text(text->Add(event.tokens));
      if (event.finished) {
        if (event.finish_reason == FinishReason::kError) return rpc::ToGrpcStatus(event.status);
        if (event.finish_reason == FinishReason::kCancelled) {
          return grpc::Status(grpc::StatusCode::CANCELLED, "request cancelled");
        }
        if (text != nullptr) response.mutable_text()->append(text->Flush());
        response.set_finish_reason(ToProto(event.finish_reason));
        ToProto(event.usage, response.mutable_usage());
        if (sampled) response.set_seed(seed);
        writer->Write(response);
        return grpc::Status::OK;
      }
      if (!writer->Write(response)) {
        (void)core_->Cancel(*id);
        return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      }
    }
  }
}

grpc::Status RouterService::GetServerInfo(grpc::ServerContext* context, const v1::GetServerInfoRequest*,
                                          v1::ServerInfo* response) {
  if (grpc::Status auth = Authorize(*context); !auth.ok()) return auth;
  const ServerInfo info = core_->Snapshot();
  response->set_policy(info.policy);
  response->set_mean_accept_length(info.mean_accept_length);
  response->set_queue_depth(info.queue_depth);
  response->set_running_requests(info.running);
  response->set_model_name(options_.model_name);
  response->set_vocab_size(options_.vocab_size);
  for (const std::string& pool : info.drafter_pools) response->add_drafters(pool);
  response->set_total_steps(info.steps);
  response->set_completed_requests(info.completed);
  response->set_overhead_p50_us(info.overhead_p50_us);
  response->set_overhead_p99_us(info.overhead_p99_us);
  response->set_policy_state_json(info.policy_state.dump());
  response->set_total_blocks(info.total_blocks);
  response->set_reserved_blocks(info.reserved_blocks);
  if (options_.metrics != nullptr) {
    const nlohmann::json doc = options_.metrics->ServerInfoJson(info);
    response->set_avg_spec_accept_length(doc["avg_spec_accept_length"].get<double>());
    response->set_speculative_num_steps(doc["speculative_num_steps"].get<double>());
    response->set_spec_acceptance_rate(doc["spec_acceptance_rate"].get<double>());
    response->set_server_info_json(doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return grpc::Status::OK;
}

RouterLoop::~RouterLoop() { Drain(absl::ZeroDuration()); }

void RouterLoop::Start() { thread_ = std::thread([this] { Run(); }); }

void RouterLoop::Run() {
  while (!stop_.load()) {
    if (abort_.exchange(false)) core_->AbortAll(absl::UnavailableError("the router is shutting down"));
    if (!core_->RunStep()) {
      if (metrics_ != nullptr) metrics_->OnIdle();
      core_->WaitForWork(absl::Milliseconds(50));
    }
  }
  core_->FlushReport();  // the last step's, when the loop stopped right after it
}

void RouterLoop::Drain(absl::Duration timeout) {
  if (!thread_.joinable()) return;
  core_->StopAccepting();
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(absl::ToInt64Microseconds(timeout));
  // Shutdown path only: a coarse wait for running requests to finish.
  while (!core_->Idle() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  abort_.store(true);
  while (abort_.load() && !core_->Idle()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop_.store(true);
  thread_.join();
}

}  // namespace splitspec::router
