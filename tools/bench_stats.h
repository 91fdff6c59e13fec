// Per-request records and the statistics `splitspec bench` reports, with the metric
// definitions of vLLM's bench_serving so that figures compare with what users know:
//   TTFT  time from sending the request to the first streamed message with tokens;
//   ITL   the gaps between consecutive streamed messages after the first (one entry per
//         message, so a speculative step that delivers several tokens is one gap);
//   TPOT  per request, (E2E - TTFT) / (output tokens - 1), for requests with > 1 output token;
//   E2E   time from sending the request to the end of its stream.
// Percentiles interpolate linearly between order statistics (numpy's default).
// Throughputs divide by the run's duration: from the run's start (time 0 of send_s) to the last
// completion, as vLLM times its benchmark.
//
// Thread-safety: values and pure functions.
#ifndef SPLITSPEC_TOOLS_BENCH_STATS_H_
#define SPLITSPEC_TOOLS_BENCH_STATS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace splitspec::tools::bench {

struct RequestRecord {
  std::string item_id;
  double send_s = 0;       // when it was sent, seconds from the run's start
  double scheduled_s = 0;  // when the arrival process wanted it sent (open loop)
  bool ok = false;
  std::string error;  // gRPC status text when !ok
  double ttft_s = 0;  // valid when output_tokens > 0
  double e2e_s = 0;
  std::vector<double> itl_s;  // one gap per streamed message after the first
  int64_t output_tokens = 0;
  int64_t prompt_tokens = 0;
  int64_t steps = 0;  // verify steps (from the final Usage)
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  std::string finish_reason;
};

// p in [0, 100]; linear interpolation between closest ranks. NaN for an empty input.
double Percentile(std::vector<double> values, double p);

struct Distribution {
  int64_t count = 0;
  double mean = 0;  // all four are 0 for an empty input (as vLLM prints them)
  double median = 0;
  double p90 = 0;
  double p99 = 0;
};
Distribution Summarize(const std::vector<double>& values);

// The request's TPOT, or nothing when it produced fewer than two tokens.
std::optional<double> Tpot(const RequestRecord& record);

struct RunSummary {
  int64_t sent = 0;
  int64_t completed = 0;
  int64_t failed = 0;
  double duration_s = 0;      // run start to last completion (0 when nothing was sent)
  int64_t output_tokens = 0;  // completed requests only
  int64_t prompt_tokens = 0;
  double request_throughput = 0;  // completed / duration
  double output_throughput = 0;   // output tokens / duration
  Distribution ttft_s, tpot_s, itl_s, e2e_s;
  int64_t steps = 0, drafted_tokens = 0, accepted_tokens = 0;
  // Tokens committed per verify step: 1 + accepted / steps (1.0 without speculation). 0 when
  // the router reported no steps.
  double mean_accept_length = 0;
  double acceptance_rate = 0;  // accepted / drafted (0 when nothing was drafted)
  double max_send_lag_s = 0;   // open loop: worst send_s - scheduled_s (client saturation)
};

// Summarises the records of one run (failed requests count only in sent/failed).
RunSummary SummarizeRun(const std::vector<RequestRecord>& records);

}  // namespace splitspec::tools::bench

#endif  // SPLITSPEC_TOOLS_BENCH_STATS_H_
