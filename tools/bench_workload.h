// Workload files for `splitspec bench`: JSONL, one request per line. Owns parsing and
// validation only; which item is sent when is the runner's business.
//
// Line format (one JSON object per non-blank line):
//   {"prompt": "...", "id": "chat-001", "max_tokens": 96, "category": "chat", "phase": "p1"}
// `prompt` (non-empty string) is required; the others are optional. Unknown keys are ignored so
// that workload generators may annotate items (e.g. with their source file).
//
// Thread-safety: free functions over values; no shared state.
#ifndef SPLITSPEC_TOOLS_BENCH_WORKLOAD_H_
#define SPLITSPEC_TOOLS_BENCH_WORKLOAD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace splitspec::tools::bench {

struct WorkloadItem {
  std::string id;        // from the file, or "<source>:<line>"
  std::string prompt;    // text; the router tokenizes it
  int max_tokens = 0;    // 0 = the bench's --max-tokens
  std::string category;  // free-form label (chat, code, qa, ...)
  std::string phase;     // label of the phase in phase-changing mixes
};

// Largest per-item max_tokens accepted (a typo like 100000 would make a run never end).
inline constexpr int kMaxItemTokens = 16384;

// Parses JSONL text. `source` names the input in error messages ("file.jsonl:12: ...").
// Fails on malformed JSON, a non-object line, a missing/empty/non-string prompt, wrongly typed
// optional fields, max_tokens outside [1, kMaxItemTokens], duplicate ids, or no items at all.
absl::StatusOr<std::vector<WorkloadItem>> ParseWorkload(absl::string_view jsonl,
                                                        absl::string_view source);

// Reads and parses a file (NotFound when it cannot be read).
absl::StatusOr<std::vector<WorkloadItem>> LoadWorkload(const std::string& path);

}  // namespace splitspec::tools::bench

#endif  // SPLITSPEC_TOOLS_BENCH_WORKLOAD_H_
