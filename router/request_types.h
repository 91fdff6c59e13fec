// What a client submits to the router core and what it streams back. The gRPC service turns
// GenerateRequest/StreamEvent into proto messages (and token ids into text deltas).
#ifndef SPLITSPEC_ROUTER_REQUEST_TYPES_H_
#define SPLITSPEC_ROUTER_REQUEST_TYPES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/engine/sampling/sampler.h"
#include "common/spec/worker_api.h"

namespace splitspec::router {

using spec::RequestId;

enum class FinishReason {
  kNone = 0,     // still running
  kLength,       // max_tokens reached
  kEos,          // the EOS token was generated (it is not streamed)
  kStopString,   // a stop string appeared in the detokenized output
  kCancelled,    // the client cancelled
  kError,        // a worker failed in a way the router could not hide; see status
};
const char* FinishReasonName(FinishReason reason);

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;  // streamed tokens plus the EOS token when it ended the request
  int32_t steps = 0;              // verify steps (the prefill counts as one)
  int32_t drafted_tokens = 0;     // draft tokens sent for verification
  int32_t accepted_tokens = 0;    // of those, accepted by the target
};

struct GenerateRequest {
  std::vector<int32_t> prompt;  // token ids, non-empty
  int32_t max_tokens = 16;      // >= 1
  // Stop strings need RouterOptions::detokenize; generation stops at the token that completes
  // one (that token is streamed; the service trims the text).
  std::vector<std::string> stop;
  bool ignore_eos = false;
  engine::SamplingParams sampling;
  std::string drafter;  // preferred drafter pool; empty = the router picks one
};

// Events of one request, in order: zero or more token events, then exactly one final event
// (finished = true). Token events are only sent when they carry tokens.
struct StreamEvent {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // tokens produced this step (may be empty on the final event)
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string matched_stop;  // for kStopString
  absl::Status status;       // non-OK only with kError (or CANCELLED for kCancelled)
  Usage usage;               // running totals
};

// Called from the router's step-loop thread with no router lock held. It may call
// RouterCore::Cancel/Submit, but must not block for long: it holds up every request.
using EventSink = std::function<void(const StreamEvent&)>;

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_REQUEST_TYPES_H_
