// tokenizer.json pre-tokenizers (see pre_tokenizers.h).
#include "common/engine/tokenizer/hf/pre_tokenizers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/engine/tokenizer/hf/byte_level.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine::hf {
namespace {

// The pattern ByteLevel splits with when use_regex is on (GPT-2's).
constexpr char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

void ReplaceAll(std::string* text, std::string_view from, std::string_view to) {
  std::string out;
  size_t done = 0;
  for (size_t at = text->find(from); at != std::string::npos; at = text->find(from, at + from.size())) {
    out.append(*text, done, at - done);
    out.append(to);
    done = at + from.size();
  }
  out.append(*text, done);
  *text = std::move(out);
}

}  // namespace

absl::StatusOr<PreTokenizers> PreTokenizers::FromJson(const nlohmann::json& config) {
  PreTokenizers pre;
  absl::StatusOr<Regex> gpt2 = Regex::Compile(kGpt2Pattern);
  if (!gpt2.ok()) return gpt2.status();
  pre.gpt2_regex_ = std::make_shared<const Regex>(*std::move(gpt2));
  if (config.is_null()) return pre;
  if (absl::Status s = pre.Add(config); !s.ok()) return s;
  return pre;
}

absl::Status PreTokenizers::Add(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string()) {
    return absl::InvalidArgumentError("tokenizer.json: a pre_tokenizer without a \"type\"");
  }
  const std::string type = config["type"].get<std::string>();
  Step step;
  if (type == "Sequence") {
    for (const nlohmann::json& child : config.value("pretokenizers", nlohmann::json::array())) {
      if (absl::Status s = Add(child); !s.ok()) return s;
    }
    return absl::OkStatus();
  } else if (type == "Split") {
    absl::StatusOr<Pattern> pattern = ParsePattern(config.value("pattern", nlohmann::json()), "Split pre_tokenizer");
    if (!pattern.ok()) return pattern.status();
    step.pattern = *std::move(pattern);
    step.invert = config.value("invert", false);
    const std::string behavior = config.value("behavior", std::string("Isolated"));
    if (behavior == "Removed") step.behavior = Behavior::kRemoved;
    else if (behavior == "Isolated") step.behavior = Behavior::kIsolated;
    else if (behavior == "MergedWithPrevious") step.behavior = Behavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext") step.behavior = Behavior::kMergedWithNext;
    else if (behavior == "Contiguous") step.behavior = Behavior::kContiguous;
    else return absl::UnimplementedError(absl::StrCat("tokenizer.json: Split behavior \"", behavior, "\" is not supported"));
  } else if (type == "ByteLevel") {
    step.kind = Step::kByteLevel;
    step.add_prefix_space = config.value("add_prefix_space", false);
    step.use_regex = config.value("use_regex", true);
  } else if (type == "Metaspace") {
    step.kind = Step::kMetaspace;
    step.replacement = config.value("replacement", std::string("\xE2\x96\x81"));
    step.split = config.value("split", true);
    std::string scheme = config.value("prepend_scheme", std::string());
    if (scheme.empty()) scheme = config.value("add_prefix_space", true) ? "always" : "never";
    if (scheme == "always") step.prepend = Step::Prepend::kAlways;
    else if (scheme == "first") step.prepend = Step::Prepend::kFirst;
    else if (scheme == "never") step.prepend = Step::Prepend::kNever;
    else return absl::UnimplementedError(absl::StrCat("tokenizer.json: Metaspace prepend_scheme \"", scheme, "\" is not supported"));
  } else if (type == "Digits") {
    step.kind = Step::kDigits;
    step.individual_digits = config.value("individual_digits", false);
  } else {
    return absl::UnimplementedError(absl::StrCat("tokenizer.json: pre_tokenizer \"", type, "\" is not supported"));
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

void PreTokenizers::Split(const PreToken& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                          bool invert, Behavior behavior, std::vector<PreToken>* out) {
  // The text as alternating spans, each flagged whether the pattern matched it.
  struct Span {
    size_t begin, end;
    bool match;
  };
  std::vector<Span> spans;
  size_t done = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > done) spans.push_back({done, begin, invert});
    spans.push_back({begin, end, !invert});
    done = end;
  }
  if (done < piece.text.size()) spans.push_back({done, piece.text.size(), invert});

  std::vector<Span> merged;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.match) merged.push_back(s);
      }
      break;
    case Behavior::kIsolated: merged = spans; break;
    case Behavior::kContiguous:
      for (const Span& s : spans) {
        if (!merged.empty() && merged.back().match && s.match) merged.back().end = s.end;
        else merged.push_back(s);
      }
      break;
    case Behavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.match && !previous_match && !merged.empty()) merged.back().end = s.end;
        else merged.push_back(s);
        previous_match = s.match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool next_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !next_match && !merged.empty()) merged.back().begin = it->begin;
        else merged.push_back(*it);
        next_match = it->match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
  }
  for (const Span& s : merged) {
    if (s.end > s.begin) out->push_back({piece.text.substr(s.begin, s.end - s.begin), piece.at_input_start && s.begin == 0});
  }
}

void PreTokenizers::ApplyStep(const Step& step, PreToken piece, std::vector<PreToken>* out) const {
  switch (step.kind) {
    case Step::kSplit:
      Split(piece, FindPattern(step.pattern, piece.text), step.invert, step.behavior, out);
      return;
    case Step::kByteLevel: {
      if (step.add_prefix_space && (piece.text.empty() || piece.text[0] != ' ')) piece.text.insert(0, " ");
      std::vector<PreToken> words;
      if (step.use_regex) {
        Split(piece, gpt2_regex_->FindAll(piece.text), false, Behavior::kIsolated, &words);
      } else {
        words.push_back(std::move(piece));
      }
      for (PreToken& word : words) {
        std::string mapped;
        AppendByteLevel(word.text, &mapped);
        out->push_back({std::move(mapped), word.at_input_start});
      }
      return;
    }
    case Step::kMetaspace: {
      ReplaceAll(&piece.text, " ", step.replacement);
      const bool prepend = step.prepend == Step::Prepend::kAlways ||
                           (step.prepend == Step::Prepend::kFirst && piece.at_input_start);
      if (prepend && piece.text.compare(0, step.replacement.size(), step.replacement) != 0) {
        piece.text.insert(0, step.replacement);
      }
      if (!step.split) {
        out->push_back(std::move(piece));
        return;
      }
      Split(piece, FindPattern(Pattern{step.replacement, nullptr}, piece.text), false, Behavior::kMergedWithNext, out);
      return;
    }
    case Step::kDigits: {
      std::vector<std::pair<size_t, size_t>> digits;
      for (size_t i = 0; i < piece.text.size(); ++i) {
        if (piece.text[i] >= '0' && piece.text[i] <= '9') digits.emplace_back(i, i + 1);
      }
      Split(piece, digits, false, step.individual_digits ? Behavior::kIsolated : Behavior::kContiguous, out);
      return;
    }
  }
}

std::vector<PreToken> PreTokenizers::Apply(PreToken text) const {
  std::vector<PreToken> pieces;
  pieces.push_back(std::move(text));
  for (const Step& step : steps_) {
    std::vector<PreToken> next;
    next.reserve(pieces.size());
    for (PreToken& piece : pieces) ApplyStep(step, std::move(piece), &next);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace splitspec::engine::hf
