// Statistics for `splitspec bench` (definitions in bench_stats.h).
#include "tools/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace splitspec::tools::bench {

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

Distribution Summarize(const std::vector<double>& values) {
  Distribution d;
  d.count = static_cast<int64_t>(values.size());
  if (values.empty()) return d;
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.median = Percentile(values, 50);
  d.p90 = Percentile(values, 90);
  d.p99 = Percentile(values, 99);
  return d;
}

std::optional<double> Tpot(const RequestRecord& record) {
  if (!record.ok || record.output_tokens < 2) return std::nullopt;
  return (record.e2e_s - record.ttft_s) / static_cast<double>(record.output_tokens - 1);
}

RunSummary SummarizeRun(const std::vector<RequestRecord>& records) {
  RunSummary s;
  std::vector<double> ttft, tpot, itl, e2e;
  double last_end = -std::numeric_limits<double>::infinity();
  for (const RequestRecord& r : records) {
    ++s.sent;
    last_end = std::max(last_end, r.send_s + r.e2e_s);
    s.max_send_lag_s = std::max(s.max_send_lag_s, r.send_s - r.scheduled_s);
    if (!r.ok) {
      ++s.failed;
      continue;
    }
    ++s.completed;
    s.output_tokens += r.output_tokens;
    s.prompt_tokens += r.prompt_tokens;
    s.steps += r.steps;
    s.drafted_tokens += r.drafted_tokens;
    s.accepted_tokens += r.accepted_tokens;
    if (r.output_tokens > 0) ttft.push_back(r.ttft_s);
    if (auto t = Tpot(r)) tpot.push_back(*t);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    e2e.push_back(r.e2e_s);
  }
  if (s.sent > 0) s.duration_s = std::max(0.0, last_end);
  if (s.duration_s > 0) {
    s.request_throughput = static_cast<double>(s.completed) / s.duration_s;
    s.output_throughput = static_cast<double>(s.output_tokens) / s.duration_s;
  }
  s.ttft_s = Summarize(ttft);
  s.tpot_s = Summarize(tpot);
  s.itl_s = Summarize(itl);
  s.e2e_s = Summarize(e2e);
  if (s.steps > 0)
    s.mean_accept_length =
        1.0 + static_cast<double>(s.accepted_tokens) / static_cast<double>(s.steps);
  if (s.drafted_tokens > 0) {
    s.acceptance_rate =
        static_cast<double>(s.accepted_tokens) / static_cast<double>(s.drafted_tokens);
  }
  return s;
}

}  // namespace splitspec::tools::bench
