// JSONL workload parsing for `splitspec bench` (see bench_workload.h for the format).
#include "tools/bench_workload.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace splitspec::tools::bench {
namespace {

absl::Status LineError(absl::string_view source, int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": ", what));
}

// Reads an optional string field; an absent key leaves *out unchanged.
absl::Status OptionalString(const nlohmann::json& object, const char* key, absl::string_view source,
                            int line, std::string* out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string())
    return LineError(source, line, absl::StrCat("\"", key, "\" must be a string"));
  *out = it->get<std::string>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<WorkloadItem>> ParseWorkload(absl::string_view jsonl,
                                                        absl::string_view source) {
  std::vector<WorkloadItem> items;
  std::set<std::string> ids;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(jsonl, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    // Parse without exceptions: a bad line must become a Status, not an abort.
    nlohmann::json object =
        nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (object.is_discarded()) return LineError(source, line_number, "not valid JSON");
    if (!object.is_object())
      return LineError(source, line_number, "each line must be a JSON object");

    WorkloadItem item;
    auto prompt = object.find("prompt");
    if (prompt == object.end()) return LineError(source, line_number, "missing \"prompt\"");
    if (!prompt->is_string()) return LineError(source, line_number, "\"prompt\" must be a string");
    item.prompt = prompt->get<std::string>();
    if (item.prompt.empty()) return LineError(source, line_number, "\"prompt\" is empty");

    if (absl::Status s = OptionalString(object, "id", source, line_number, &item.id); !s.ok())
      return s;
    if (absl::Status s = OptionalString(object, "category", source, line_number, &item.category);
        !s.ok())
      return s;
    if (absl::Status s = OptionalString(object, "phase", source, line_number, &item.phase); !s.ok())
      return s;
    if (item.id.empty()) item.id = absl::StrCat(source, ":", line_number);
    if (!ids.insert(item.id).second) {
      return LineError(source, line_number, absl::StrCat("duplicate id \"", item.id, "\""));
    }

    auto max_tokens = object.find("max_tokens");
    if (max_tokens != object.end() && !max_tokens->is_null()) {
      if (!max_tokens->is_number_integer())
        return LineError(source, line_number, "\"max_tokens\" must be an integer");
      const long long value = max_tokens->get<long long>();
      if (value < 1 || value > kMaxItemTokens) {
        return LineError(source, line_number,
                         absl::StrCat("\"max_tokens\" must be in [1, ", kMaxItemTokens, "]"));
      }
      item.max_tokens = static_cast<int>(value);
    }
    items.push_back(std::move(item));
  }
  if (items.empty())
    return absl::InvalidArgumentError(absl::StrCat(source, ": no requests in the workload"));
  return items;
}

absl::StatusOr<std::vector<WorkloadItem>> LoadWorkload(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read workload file ", path));
  std::stringstream contents;
  contents << in.rdbuf();
  return ParseWorkload(contents.str(), path);
}

}  // namespace splitspec::tools::bench
