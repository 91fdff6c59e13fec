// tokenizer.json decoders (see decoders.h).
#include "common/engine/tokenizer/hf/decoders.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/engine/tokenizer/hf/byte_level.h"
#include "common/engine/tokenizer/utf8.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine::hf {
namespace {

// Byte value of a "<0xAB>" token, or -1.
int ByteTokenValue(const std::string& text) {
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>') return -1;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    const char h = text[i];
    value *= 16;
    if (h >= '0' && h <= '9') value += h - '0';
    else if (h >= 'A' && h <= 'F') value += h - 'A' + 10;
    else if (h >= 'a' && h <= 'f') value += h - 'a' + 10;
    else return -1;
  }
  return value;
}

// A Strip decoder's "start" or "stop" (0 when absent): a count of characters, so a non-negative
// integer (Hugging Face reads a usize). Anything else is an error rather than a conversion: a
// float too large for an int would make the conversion undefined.
absl::StatusOr<int> StripCount(const nlohmann::json& config, const char* key) {
  if (!config.contains(key)) return 0;
  const nlohmann::json& value = config[key];
  constexpr uint64_t kMaxCount = uint64_t{1} << 20;  // more than any text a decode produces
  if (!value.is_number_unsigned() || value.get<uint64_t>() > kMaxCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.json: Strip decoder \"", key, "\" must be an integer from 0 to ", kMaxCount));
  }
  return static_cast<int>(value.get<uint64_t>());
}

}  // namespace

absl::StatusOr<Decoders> Decoders::FromJson(const nlohmann::json& config) {
  Decoders decoders;
  if (config.is_null()) return decoders;
  if (absl::Status s = decoders.Add(config); !s.ok()) return s;
  decoders.depends_on_whole_text_ = decoders.ComputeDependsOnWholeText();
  return decoders;
}

absl::Status Decoders::Add(const nlohmann::json& config) {
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string()) {
    return absl::InvalidArgumentError("tokenizer.json: a decoder without a \"type\"");
  }
  const std::string type = config["type"].get<std::string>();
  Step step;
  if (type == "Sequence") {
    for (const nlohmann::json& child : config.value("decoders", nlohmann::json::array())) {
      if (absl::Status s = Add(child); !s.ok()) return s;
    }
    return absl::OkStatus();
  } else if (type == "ByteLevel") {
    step.kind = Step::kByteLevel;
  } else if (type == "Replace") {
    step.kind = Step::kReplace;
    const nlohmann::json pattern = config.value("pattern", nlohmann::json());
    if (!pattern.is_object() || !pattern.contains("String") || !pattern["String"].is_string()) {
      return absl::UnimplementedError("tokenizer.json: Replace decoder with a non-string pattern is not supported");
    }
    step.pattern = pattern["String"].get<std::string>();
    step.content = config.value("content", std::string());
  } else if (type == "ByteFallback") {
    step.kind = Step::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Step::kFuse;
  } else if (type == "Strip") {
    step.kind = Step::kStrip;
    step.content = config.value("content", std::string(" "));
    // Hugging Face's Strip removes one character (a Rust `char`); a longer or empty content
    // would strip differently when streaming than when decoding at once, or loop for nothing.
    size_t length = 0;
    if (step.content.empty() || !tokenizer_internal::DecodeValidUtf8Prefix(step.content, &length) ||
        length != step.content.size()) {
      return absl::InvalidArgumentError("tokenizer.json: Strip decoder content must be exactly one character");
    }
    absl::StatusOr<int> start = StripCount(config, "start"), stop = StripCount(config, "stop");
    if (!start.ok()) return start.status();
    if (!stop.ok()) return stop.status();
    step.start = *start;
    step.stop = *stop;
  } else if (type == "Metaspace") {
    step.kind = Step::kMetaspace;
    step.content = config.value("replacement", std::string("\xE2\x96\x81"));
    const std::string scheme = config.value("prepend_scheme", std::string());
    step.prepend = scheme.empty() ? config.value("add_prefix_space", true) : scheme != "never";
  } else {
    return absl::UnimplementedError(absl::StrCat("tokenizer.json: decoder \"", type, "\" is not supported"));
  }
  steps_.push_back(std::move(step));
  return absl::OkStatus();
}

void Decoders::ApplyStep(const Step& step, std::vector<DecodePiece>* pieces) {
  switch (step.kind) {
    case Step::kByteLevel: {
      // Runs of byte-level tokens become their bytes; added tokens stay as they are.
      std::vector<DecodePiece> out;
      for (DecodePiece& piece : *pieces) {
        if (piece.added) {
          out.push_back(std::move(piece));
          continue;
        }
        if (out.empty() || out.back().added) out.push_back({});
        AppendBytesOfByteLevel(piece.text, &out.back().text);
      }
      *pieces = std::move(out);
      return;
    }
    case Step::kReplace:
      for (DecodePiece& piece : *pieces) {
        if (!step.pattern.empty()) piece.text = absl::StrReplaceAll(piece.text, {{step.pattern, step.content}});
      }
      return;
    case Step::kByteFallback: {
      // Consecutive <0xAB> tokens become their bytes (whole characters or not: see the header).
      std::vector<DecodePiece> out;
      bool previous_bytes = false;
      for (DecodePiece& piece : *pieces) {
        const int byte = piece.added ? -1 : ByteTokenValue(piece.text);
        if (byte < 0) {
          out.push_back(std::move(piece));
          previous_bytes = false;
          continue;
        }
        if (!previous_bytes) out.push_back({});
        out.back().text.push_back(static_cast<char>(byte));
        previous_bytes = true;
      }
      *pieces = std::move(out);
      return;
    }
    case Step::kFuse: {
      DecodePiece fused;
      for (const DecodePiece& piece : *pieces) fused.text += piece.text;
      pieces->assign(1, std::move(fused));
      return;
    }
    case Step::kStrip:
      for (DecodePiece& piece : *pieces) {
        for (int i = 0; i < step.start && piece.text.compare(0, step.content.size(), step.content) == 0; ++i) {
          piece.text.erase(0, step.content.size());
        }
        for (int i = 0; i < step.stop && piece.text.size() >= step.content.size() &&
                        piece.text.compare(piece.text.size() - step.content.size(), step.content.size(), step.content) == 0;
             ++i) {
          piece.text.resize(piece.text.size() - step.content.size());
        }
      }
      return;
    case Step::kMetaspace:
      for (size_t i = 0; i < pieces->size(); ++i) {
        DecodePiece& piece = (*pieces)[i];
        piece.text = absl::StrReplaceAll(piece.text, {{step.content, " "}});
        if (i == 0 && step.prepend && !piece.text.empty() && piece.text[0] == ' ') piece.text.erase(0, 1);
      }
      return;
  }
}

bool Decoders::ComputeDependsOnWholeText() const {
  bool merged = false;
  for (const Step& step : steps_) {
    if (step.kind == Step::kFuse || step.kind == Step::kByteLevel || step.kind == Step::kByteFallback) merged = true;
    if (step.kind == Step::kStrip && merged && (step.start > 0 || step.stop > 0)) return true;
  }
  return false;
}

std::string Decoders::Apply(std::vector<DecodePiece> pieces) const {
  for (const Step& step : steps_) ApplyStep(step, &pieces);
  std::string text;
  for (const DecodePiece& piece : pieces) text += piece.text;
  return text;
}

}  // namespace splitspec::engine::hf
