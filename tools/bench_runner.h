// Drives one load level of `splitspec bench` against a router: open loop (Poisson arrivals at a
// request rate, sent by a bounded pool of client threads) or closed loop (N clients, each
// sending its next request when the previous one ends). Owns timing, bounding and the progress
// line; the per-request timing is RouterClient's, the statistics bench_stats'.
//
// Bounds: no request is sent after `duration_s`; every call carries the deadline
// start + duration_s + drain_s, so a run ends by then whatever the router does.
//
// Thread-safety: RunLoad is re-entrant; it starts and joins its own threads.
#ifndef SPLITSPEC_TOOLS_BENCH_RUNNER_H_
#define SPLITSPEC_TOOLS_BENCH_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tools/bench_client.h"
#include "tools/bench_stats.h"
#include "tools/bench_workload.h"

namespace splitspec::tools::bench {

struct LoadOptions {
  double rate = 1.0;       // requests/s (open loop); +inf sends all at once
  int concurrency = 0;     // > 0: closed loop with this many clients (rate ignored)
  double duration_s = 30;  // sending window
  double drain_s = 60;     // extra time for requests in flight to finish
  int max_inflight = 64;   // open loop: client threads; later arrivals wait (send lag)
  int64_t max_requests = 100000;
  uint64_t seed = 0;
  int default_max_tokens = 128;
  bool ignore_eos = false;
  std::string drafter;   // preferred drafter pool ("" = the router chooses)
  bool progress = true;  // progress line on stderr
  std::string label;     // shown in the progress line
};

// The request for one workload item.
v1::GenerateRequest MakeRequest(const WorkloadItem& item, const LoadOptions& options);

struct LoadResult {
  std::vector<RequestRecord> records;  // in send order
  // Open loop: arrivals that found every client thread busy until the sending window closed,
  // so were never sent (the router could not keep up with the rate at this --max-inflight).
  int64_t dropped = 0;
};

// Runs one load level. Items are taken in file order, cycling, starting from the first, so
// that the same rate sees the same requests under every policy.
LoadResult RunLoad(RouterClient* client, const std::vector<WorkloadItem>& items,
                   const LoadOptions& options);

}  // namespace splitspec::tools::bench

#endif  // SPLITSPEC_TOOLS_BENCH_RUNNER_H_
