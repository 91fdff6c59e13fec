// tokenizer.json normalizers (see normalizers.h).
#include "common/engine/tokenizer/hf/normalizers.h"

#include <unicode/unistr.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine::hf {

absl::StatusOr<Pattern> ParsePattern(const nlohmann::json& pattern, const char* where) {
  Pattern out;
  if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
    out.literal = pattern["String"].get<std::string>();
    if (out.literal.empty()) return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", where, ": empty pattern"));
    return out;
  }
  if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
    absl::StatusOr<Regex> regex = Regex::Compile(pattern["Regex"].get<std::string>());
    if (!regex.ok()) {
      return absl::Status(regex.status().code(), absl::StrCat("tokenizer.json: ", where, ": ", regex.status().message()));
    }
    out.regex = std::make_shared<const Regex>(*std::move(regex));
    return out;
  }
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", where, ": pattern is neither {\"String\"} nor {\"Regex\"}"));
}

std::vector<std::pair<size_t, size_t>> FindPattern(const Pattern& pattern, std::string_view text) {
  if (pattern.regex != nullptr) return pattern.regex->FindAll(text);
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t at = text.find(pattern.literal); at != std::string_view::npos;
       at = text.find(pattern.literal, at + pattern.literal.size())) {
    matches.emplace_back(at, at + pattern.literal.size());
  }
  return matches;
}

absl::StatusOr<Normalizers> Normalizers::FromJson(const nlohmann::json& config) {
  Normalizers normalizers;
  if (config.is_null()) return normalizers;
  if (absl::Status s = normalizers.Add(config); !s.ok()) return s;
  return normalizers;
}

absl::Status Normalizers::Add(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string()) {
    return absl::InvalidArgumentError("tokenizer.json: a normalizer without a \"type\"");
  }
  const std::string type = config["type"].get<std::string>();
  Step step;
  if (type == "Sequence") {
    for (const nlohmann::json& child : config.value("normalizers", nlohmann::json::array())) {
      if (absl::Status s = Add(child); !s.ok()) return s;
    }
    return absl::OkStatus();
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    step.form = type == "NFC" ? NormalForm::kNfc : type == "NFD" ? NormalForm::kNfd
              : type == "NFKC" ? NormalForm::kNfkc : NormalForm::kNfkd;
  } else if (type == "Prepend") {
    step.kind = Step::kPrepend;
    step.pattern = config.value("prepend", std::string());
  } else if (type == "Replace") {
    step.kind = Step::kReplace;
    absl::StatusOr<Pattern> pattern = ParsePattern(config.value("pattern", nlohmann::json()), "Replace normalizer");
    if (!pattern.ok()) return pattern.status();
    step.pattern = pattern->literal;
    step.regex = pattern->regex;
    step.content = config.value("content", std::string());
  } else if (type == "Lowercase") {
    step.kind = Step::kLowercase;
  } else if (type == "Strip") {
    step.kind = Step::kStrip;
    step.strip_left = config.value("strip_left", false);
    step.strip_right = config.value("strip_right", false);
  } else {
    return absl::UnimplementedError(absl::StrCat("tokenizer.json: normalizer \"", type, "\" is not supported"));
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

std::string Normalizers::Apply(std::string text) const {
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::kForm: {
        absl::StatusOr<std::string> normalized = Normalize(step.form, text);
        if (normalized.ok()) text = *std::move(normalized);
        break;
      }
      case Step::kPrepend:
        if (!text.empty()) text.insert(0, step.pattern);
        break;
      case Step::kReplace: {
        Pattern pattern{step.pattern, step.regex};
        std::string out;
        size_t done = 0;
        for (const auto& [begin, end] : FindPattern(pattern, text)) {
          out.append(text, done, begin - done);
          out.append(step.content);
          done = end;
        }
        out.append(text, done);
        text = std::move(out);
        break;
      }
      case Step::kLowercase: {
        icu::UnicodeString u = icu::UnicodeString::fromUTF8(text);
        u.toLower();
        text.clear();
        u.toUTF8String(text);
        break;
      }
      case Step::kStrip: {
        std::vector<CodePoint> points = DecodeUtf8(text);
        size_t begin = 0, end = points.size();
        while (step.strip_left && begin < end && IsWhiteSpace(points[begin].value)) ++begin;
        while (step.strip_right && end > begin && IsWhiteSpace(points[end - 1].value)) --end;
        const size_t b = begin < points.size() ? points[begin].byte_offset : text.size();
        const size_t e = end < points.size() ? points[end].byte_offset : text.size();
        text = text.substr(b, e - b);
        break;
      }
    }
  }
  return text;
}

}  // namespace splitspec::engine::hf
