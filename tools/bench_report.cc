// Text, CSV and JSON reports for `splitspec bench` (see bench_report.h).
#include "tools/bench_report.h"

#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace splitspec::tools::bench {
namespace {

double Ms(double seconds) { return seconds * 1000.0; }

std::string RateText(double rate) { return std::isinf(rate) ? "inf" : absl::StrFormat("%g", rate); }

// RFC 4180 quoting for free-text fields (ids, errors).
std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

nlohmann::json DistributionJson(const Distribution& d) {
  return {{"count", d.count},
          {"mean_ms", Ms(d.mean)},
          {"median_ms", Ms(d.median)},
          {"p90_ms", Ms(d.p90)},
          {"p99_ms", Ms(d.p99)}};
}

void AppendDistribution(const char* title, const char* name, const Distribution& d,
                        std::string* out) {
  absl::StrAppendFormat(out, "%s\n", title);
  absl::StrAppendFormat(out, "  Mean %-6s (ms): %12.2f\n", name, Ms(d.mean));
  absl::StrAppendFormat(out, "  Median %-4s (ms): %12.2f\n", name, Ms(d.median));
  absl::StrAppendFormat(out, "  P99 %-7s (ms): %12.2f\n", name, Ms(d.p99));
}

}  // namespace

std::string LevelName(const LevelResult& level) {
  if (level.concurrency > 0) return absl::StrCat("concurrency ", level.concurrency);
  return std::isinf(level.rate) ? "rate inf" : absl::StrFormat("rate %g/s", level.rate);
}

std::string FormatLevel(const LevelResult& level) {
  const RunSummary& s = level.summary;
  std::string out = absl::StrFormat("============ %s ============\n", LevelName(level));
  absl::StrAppendFormat(&out, "  Successful requests:        %8d\n", s.completed);
  absl::StrAppendFormat(&out, "  Failed requests:            %8d\n", s.failed);
  if (level.dropped > 0) {
    absl::StrAppendFormat(
        &out, "  Dropped arrivals:           %8d  (all clients busy: raise --max-inflight)\n",
        level.dropped);
  }
  absl::StrAppendFormat(&out, "  Duration (s):               %8.2f\n", s.duration_s);
  absl::StrAppendFormat(&out, "  Output tokens:              %8d\n", s.output_tokens);
  absl::StrAppendFormat(&out, "  Request throughput (req/s): %8.3f\n", s.request_throughput);
  absl::StrAppendFormat(&out, "  Output throughput (tok/s):  %8.2f\n", s.output_throughput);
  absl::StrAppendFormat(
      &out, "  Mean accept length:         %8.3f  (acceptance rate %.3f, %d/%d drafts)\n",
      s.mean_accept_length, s.acceptance_rate, s.accepted_tokens, s.drafted_tokens);
  if (level.concurrency == 0)
    absl::StrAppendFormat(&out, "  Worst send lag (s):         %8.3f\n", s.max_send_lag_s);
  if (level.load_average >= 0)
    absl::StrAppendFormat(&out, "  Machine load (1 min):       %8.2f\n", level.load_average);
  AppendDistribution("  ---- Time to first token ----", "TTFT", s.ttft_s, &out);
  AppendDistribution("  ---- Time per output token (excl. 1st) ----", "TPOT", s.tpot_s, &out);
  AppendDistribution("  ---- Inter-token latency ----", "ITL", s.itl_s, &out);
  AppendDistribution("  ---- End-to-end latency ----", "E2E", s.e2e_s, &out);
  for (const RequestRecord& r : level.records) {
    if (!r.ok) {
      absl::StrAppendFormat(&out, "  first error: %s: %s\n", r.item_id, r.error);
      break;
    }
  }
  return out;
}

std::string FormatTable(const std::vector<LevelResult>& levels) {
  std::string out = absl::StrFormat("%-16s %5s %5s %5s %8s %8s %9s %9s %9s %9s %9s %9s %7s\n",
                                    "level", "ok", "fail", "drop", "req/s", "tok/s", "TTFT ms",
                                    "TTFTp99", "TPOT ms", "ITL ms", "E2E ms", "E2Ep99", "accept");
  for (const LevelResult& level : levels) {
    const RunSummary& s = level.summary;
    absl::StrAppendFormat(
        &out, "%-16s %5d %5d %5d %8.3f %8.2f %9.1f %9.1f %9.2f %9.2f %9.1f %9.1f %7.3f\n",
        LevelName(level), s.completed, s.failed, level.dropped, s.request_throughput,
        s.output_throughput, Ms(s.ttft_s.mean), Ms(s.ttft_s.p99), Ms(s.tpot_s.mean),
        Ms(s.itl_s.mean), Ms(s.e2e_s.mean), Ms(s.e2e_s.p99), s.mean_accept_length);
  }
  return out;
}

std::string SummaryCsv(const std::vector<LevelResult>& levels) {
  std::string out =
      "mode,rate,concurrency,sent,completed,failed,duration_s,output_tokens,request_throughput,"
      "output_throughput,"
      "ttft_mean_ms,ttft_median_ms,ttft_p99_ms,tpot_mean_ms,tpot_median_ms,tpot_p99_ms,itl_mean_ms,"
      "itl_median_ms,"
      "itl_p99_ms,e2e_mean_ms,e2e_median_ms,e2e_p99_ms,steps,drafted_tokens,accepted_tokens,mean_"
      "accept_length,"
      "acceptance_rate,max_send_lag_s,dropped\n";
  for (const LevelResult& level : levels) {
    const RunSummary& s = level.summary;
    absl::StrAppendFormat(
        &out, "%s,%s,%d,%d,%d,%d,%.4f,%d,%.5f,%.4f,", level.concurrency > 0 ? "closed" : "open",
        level.concurrency > 0 ? "" : RateText(level.rate), level.concurrency, s.sent, s.completed,
        s.failed, s.duration_s, s.output_tokens, s.request_throughput, s.output_throughput);
    for (const Distribution* d : {&s.ttft_s, &s.tpot_s, &s.itl_s, &s.e2e_s}) {
      absl::StrAppendFormat(&out, "%.3f,%.3f,%.3f,", Ms(d->mean), Ms(d->median), Ms(d->p99));
    }
    absl::StrAppendFormat(&out, "%d,%d,%d,%.4f,%.4f,%.4f,%d\n", s.steps, s.drafted_tokens,
                          s.accepted_tokens, s.mean_accept_length, s.acceptance_rate,
                          s.max_send_lag_s, level.dropped);
  }
  return out;
}

std::string RequestsCsv(const std::vector<LevelResult>& levels) {
  std::string out =
      "level,item_id,ok,scheduled_s,send_s,ttft_ms,e2e_ms,tpot_ms,chunks,output_tokens,prompt_"
      "tokens,steps,"
      "drafted_tokens,accepted_tokens,finish_reason,error\n";
  for (const LevelResult& level : levels) {
    for (const RequestRecord& r : level.records) {
      const std::optional<double> tpot = Tpot(r);
      absl::StrAppendFormat(
          &out, "%s,%s,%d,%.4f,%.4f,%.3f,%.3f,%s,%d,%d,%d,%d,%d,%d,%s,%s\n",
          CsvField(LevelName(level)), CsvField(r.item_id), r.ok ? 1 : 0, r.scheduled_s, r.send_s,
          Ms(r.ttft_s), Ms(r.e2e_s), tpot ? absl::StrFormat("%.3f", Ms(*tpot)) : "",
          r.output_tokens > 0 ? r.itl_s.size() + 1 : 0, r.output_tokens, r.prompt_tokens, r.steps,
          r.drafted_tokens, r.accepted_tokens, r.finish_reason, CsvField(r.error));
    }
  }
  return out;
}

nlohmann::json ToJson(const nlohmann::json& settings, const std::vector<LevelResult>& levels) {
  nlohmann::json out = {{"settings", settings}, {"levels", nlohmann::json::array()}};
  for (const LevelResult& level : levels) {
    const RunSummary& s = level.summary;
    nlohmann::json summary = {
        {"sent", s.sent},
        {"completed", s.completed},
        {"failed", s.failed},
        {"duration_s", s.duration_s},
        {"output_tokens", s.output_tokens},
        {"prompt_tokens", s.prompt_tokens},
        {"request_throughput", s.request_throughput},
        {"output_throughput", s.output_throughput},
        {"ttft", DistributionJson(s.ttft_s)},
        {"tpot", DistributionJson(s.tpot_s)},
        {"itl", DistributionJson(s.itl_s)},
        {"e2e", DistributionJson(s.e2e_s)},
        {"steps", s.steps},
        {"drafted_tokens", s.drafted_tokens},
        {"accepted_tokens", s.accepted_tokens},
        {"mean_accept_length", s.mean_accept_length},
        {"acceptance_rate", s.acceptance_rate},
        {"max_send_lag_s", s.max_send_lag_s},
        {"dropped", level.dropped},
    };
    nlohmann::json requests = nlohmann::json::array();
    for (const RequestRecord& r : level.records) {
      nlohmann::json itl_ms = nlohmann::json::array();
      for (double gap : r.itl_s) itl_ms.push_back(Ms(gap));
      requests.push_back({{"id", r.item_id},
                          {"ok", r.ok},
                          {"error", r.error},
                          {"scheduled_s", r.scheduled_s},
                          {"send_s", r.send_s},
                          {"ttft_ms", Ms(r.ttft_s)},
                          {"e2e_ms", Ms(r.e2e_s)},
                          {"itl_ms", itl_ms},
                          {"output_tokens", r.output_tokens},
                          {"prompt_tokens", r.prompt_tokens},
                          {"steps", r.steps},
                          {"drafted_tokens", r.drafted_tokens},
                          {"accepted_tokens", r.accepted_tokens},
                          {"finish_reason", r.finish_reason}});
    }
    // JSON has no infinity: an unbounded rate is written as the string "inf".
    nlohmann::json rate =
        std::isinf(level.rate) ? nlohmann::json("inf") : nlohmann::json(level.rate);
    out["levels"].push_back({{"mode", level.concurrency > 0 ? "closed" : "open"},
                             {"rate", level.concurrency > 0 ? nlohmann::json(nullptr) : rate},
                             {"concurrency", level.concurrency},
                             {"name", LevelName(level)},
                             {"summary", summary},
                             {"server_state", level.server_state},
                             {"server_info", level.server_info},
                             {"load_average", level.load_average},
                             {"requests", requests}});
  }
  return out;
}

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  out << contents;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

}  // namespace splitspec::tools::bench
