// Drives one load level of `splitspec bench` against a router: open loop (Poisson arrivals at a
// request rate, sent by a bounded pool of client threads) or closed loop (N clients, each
// sending its next request when the previous one ends). Owns timing, bounding and the progress
// line; the per-request timing is RouterClient's, the statistics bench_stats'.
//
// Bounds: no request due after `duration_s` is sent, nor one that waited for a free client
// thread until past it; every call carries the deadline start + duration_s + drain_s, so a run
// ends by then whatever the router does. Every scheduled arrival is either sent (one record)
// or counted as dropped: records.size() + dropped == scheduled.
//
// Whether an arrival is sent depends on when a client was free for it, never on when a thread
// happened to wake up: the arrival due at 29.999 s of a 30 s window that the sending thread
// pushes (or a client pops) at 30.002 s is sent, since a client was free when it was due.
//
// Thread-safety: RunLoad is re-entrant; it starts and joins its own threads.
#ifndef SPLITSPEC_TOOLS_BENCH_RUNNER_H_
#define SPLITSPEC_TOOLS_BENCH_RUNNER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tools/bench_client.h"
#include "tools/bench_progress.h"
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
  // Sampling: temperature 0 sends greedy requests (every policy must then produce the same
  // tokens); above 0, each request is sampled with top_k and a seed of its own, a function of
  // `seed` and the item's id, so a run's requests draw the same way whatever serves them.
  float temperature = 0;
  int top_k = 0;
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
  // Open loop: arrivals in the schedule (= records.size() + dropped); closed loop: requests sent.
  int64_t scheduled = 0;
};

// Runs one load level. Items are taken in file order, cycling, starting from the first, so
// that the same rate sees the same requests under every policy.
LoadResult RunLoad(RouterClient* client, const std::vector<WorkloadItem>& items,
                   const LoadOptions& options);

// ---- the open loop with its time and router injected (what RunLoad runs; for tests) ---------

// Time as the open loop reads it: std::chrono::steady_clock and a real sleep in RunLoad; a
// test injects a fake one that places every arrival and every late wakeup exactly.
// Thread-safety: implementations must be safe to call from several threads at once.
class LoadClock {
 public:
  virtual ~LoadClock() = default;
  virtual SteadyTime Now() = 0;
  // Returns at or after `t`; possibly late (a loaded machine), which must change nothing but
  // the send lag.
  virtual void SleepUntil(SteadyTime t) = 0;
};

// Sends one request and blocks until it ends (RouterClient::Generate in RunLoad). Called from
// several client threads at once.
using SendFn = std::function<RequestRecord(const v1::GenerateRequest& request, SteadyTime run_start,
                                           SteadyTime deadline)>;

// The open loop over `schedule` (arrival offsets in seconds from the start, ascending): each
// arrival goes to the first free client thread (options.max_inflight of them); an arrival is
// dropped when no client was free for it before options.duration_s, and sent otherwise.
// `counters` may be null.
LoadResult RunOpenLoop(const SendFn& send, const std::vector<WorkloadItem>& items,
                       const LoadOptions& options, const std::vector<double>& schedule,
                       LoadClock* clock, LoadCounters* counters);

}  // namespace splitspec::tools::bench

#endif  // SPLITSPEC_TOOLS_BENCH_RUNNER_H_
