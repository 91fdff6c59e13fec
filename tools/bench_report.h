// Report writers of `splitspec bench`: the per-level text block and the final one-line-per-level
// table on stdout, a summary CSV (one row per load level), a per-request CSV, and a JSON file
// with the run's settings, the summaries and every request.
//
// Thread-safety: pure functions; the writers touch only the file they are given.
#ifndef SPLITSPEC_TOOLS_BENCH_REPORT_H_
#define SPLITSPEC_TOOLS_BENCH_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "tools/bench_stats.h"

namespace splitspec::tools::bench {

// One load level: a request rate (open loop) or a client count (closed loop).
struct LevelResult {
  double rate = 0;      // requests/s; +inf = all at once; unused when concurrency > 0
  int concurrency = 0;  // > 0: closed loop
  RunSummary summary;
  int64_t dropped = 0;  // open-loop arrivals never sent (see LoadResult)
  std::vector<RequestRecord> records;
  std::string server_state;  // the router's policy_state_json after the level
  std::string server_info;   // the router's whole /server_info document after the level
  double load_average = -1;  // the machine's 1-minute load average after the level (-1: unknown)
};

// "rate 2/s", "rate inf", "concurrency 4".
std::string LevelName(const LevelResult& level);

// A vLLM-style block for one level (milliseconds for latencies).
std::string FormatLevel(const LevelResult& level);
// One row per level: rate, req/s, tok/s, TTFT/TPOT/ITL/E2E means and p99, accept length.
std::string FormatTable(const std::vector<LevelResult>& levels);

std::string SummaryCsv(const std::vector<LevelResult>& levels);
std::string RequestsCsv(const std::vector<LevelResult>& levels);
nlohmann::json ToJson(const nlohmann::json& settings, const std::vector<LevelResult>& levels);

// Writes `contents` to `path` (Internal error naming the path when it cannot).
absl::Status WriteFile(const std::string& path, const std::string& contents);

}  // namespace splitspec::tools::bench

#endif  // SPLITSPEC_TOOLS_BENCH_REPORT_H_
