// Parser of the text exposition format 0.0.4 for tests.
#include "tests/unit/metrics/exposition_parser.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace splitspec::metrics::testing {
namespace {

bool IsNameChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

absl::StatusOr<double> ParseValue(const std::string& s) {
  if (s == "+Inf") return HUGE_VAL;
  if (s == "-Inf") return -HUGE_VAL;
  if (s == "NaN") return std::nan("");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) {
    return absl::InvalidArgumentError(absl::StrCat("bad sample value '", s, "'"));
  }
  return v;
}

absl::StatusOr<Sample> ParseSampleLine(const std::string& line) {
  Sample sample;
  size_t i = 0;
  while (i < line.size() && IsNameChar(line[i], i == 0)) ++i;
  if (i == 0) return absl::InvalidArgumentError(absl::StrCat("no metric name: ", line));
  sample.name = line.substr(0, i);
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const size_t start = i;
      while (i < line.size() && IsNameChar(line[i], i == start)) ++i;
      std::string label = line.substr(start, i - start);
      if (label.empty() || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
        return absl::InvalidArgumentError(absl::StrCat("bad label in: ", line));
      }
      i += 2;
      std::string value;
      bool closed = false;
      while (i < line.size()) {
        const char c = line[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\') {
          if (i >= line.size()) break;
          const char e = line[i++];
          if (e == 'n') {
            value += '\n';
          } else if (e == '\\' || e == '"') {
            value += e;
          } else {
            return absl::InvalidArgumentError(absl::StrCat("bad escape in: ", line));
          }
        } else if (c == '\n') {
          return absl::InvalidArgumentError("raw newline in label value");
        } else {
          value += c;
        }
      }
      if (!closed) return absl::InvalidArgumentError(absl::StrCat("unterminated value: ", line));
      sample.labels.emplace_back(std::move(label), std::move(value));
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) return absl::InvalidArgumentError(absl::StrCat("no '}': ", line));
    ++i;
  }
  if (i >= line.size() || line[i] != ' ') {
    return absl::InvalidArgumentError(absl::StrCat("no value: ", line));
  }
  std::string rest = line.substr(i + 1);
  // An optional timestamp follows the value.
  const size_t space = rest.find(' ');
  absl::StatusOr<double> value = ParseValue(rest.substr(0, space));
  if (!value.ok()) return value.status();
  sample.value = *value;
  return sample;
}

std::string UnescapeHelp(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      out += s[i + 1] == 'n' ? '\n' : s[i + 1];
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool Matches(const Sample& s, const std::map<std::string, std::string>& labels) {
  for (const auto& [k, v] : labels) {
    bool found = false;
    for (const auto& [sk, sv] : s.labels) {
      if (sk == k && sv == v) found = true;
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

std::vector<Sample> Exposition::Find(const std::string& name,
                                     const std::map<std::string, std::string>& labels) const {
  std::vector<Sample> out;
  for (const Sample& s : samples) {
    if (s.name == name && Matches(s, labels)) out.push_back(s);
  }
  return out;
}

std::optional<double> Exposition::Value(const std::string& name,
                                        const std::map<std::string, std::string>& labels) const {
  const std::vector<Sample> found = Find(name, labels);
  if (found.size() != 1) return std::nullopt;
  return found[0].value;
}

absl::StatusOr<Exposition> ParseExposition(const std::string& text) {
  Exposition out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, keyword, family;
      words >> hash >> keyword >> family;
      std::string rest;
      std::getline(words, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (keyword == "TYPE") out.types[family] = rest;
      if (keyword == "HELP") out.helps[family] = UnescapeHelp(rest);
      continue;
    }
    absl::StatusOr<Sample> sample = ParseSampleLine(line);
    if (!sample.ok()) return sample.status();
    out.samples.push_back(*std::move(sample));
  }
  return out;
}

}  // namespace splitspec::metrics::testing
