// tokenizer.json pipeline: added-token split -> normalize -> pre-tokenize -> BPE ->
// post-process; decoding through the decoders (see hf_tokenizer.h).
#include "common/engine/tokenizer/hf/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/engine/tokenizer/hf/added_tokens.h"
#include "common/engine/tokenizer/hf/bpe_model.h"
#include "common/engine/tokenizer/hf/decoders.h"
#include "common/engine/tokenizer/hf/normalizers.h"
#include "common/engine/tokenizer/hf/pre_tokenizers.h"
#include "common/engine/tokenizer/utf8.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine {
namespace {

using hf::AddedTokens;
using hf::BpeModel;
using hf::Decoders;
using hf::Normalizers;
using hf::PreTokenizers;

// Tokens that decode to nothing visible may precede the new one; this many visible tokens
// of context are enough for every decoder here to agree on the new token's text.
constexpr size_t kIncrementalContext = 6;

// A token string of tokenizer_config.json: "text" or {"content": "text", ...}.
std::string ConfigToken(const nlohmann::json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return "";
  const nlohmann::json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) return value["content"].get<std::string>();
  return "";
}

// Length of `bytes` without a character cut short at its end.
size_t CompleteLength(std::string_view bytes) {
  for (size_t tail = 1; tail <= std::min<size_t>(3, bytes.size()); ++tail) {
    const std::string_view suffix = bytes.substr(bytes.size() - tail);
    if (tokenizer_internal::IsIncompleteUtf8(suffix)) return bytes.size() - tail;
  }
  return bytes.size();
}

// Valid characters kept, every invalid byte shown as U+FFFD.
std::string Sanitize(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    size_t length = 1;
    if (tokenizer_internal::DecodeValidUtf8Prefix(bytes, &length)) out.append(bytes.substr(0, length));
    else out.append(tokenizer_internal::kReplacementChar);
    bytes.remove_prefix(length);
  }
  return out;
}

class HfTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Create(const nlohmann::json& tokenizer,
                                                             const nlohmann::json& config) {
    std::unique_ptr<HfTokenizer> t(new HfTokenizer);
    auto model = BpeModel::FromJson(tokenizer.value("model", nlohmann::json()));
    if (!model.ok()) return model.status();
    t->model_ = *std::move(model);
    auto added = AddedTokens::FromJson(tokenizer.value("added_tokens", nlohmann::json()));
    if (!added.ok()) return added.status();
    t->added_ = *std::move(added);
    auto normalizers = Normalizers::FromJson(tokenizer.value("normalizer", nlohmann::json()));
    if (!normalizers.ok()) return normalizers.status();
    t->normalizers_ = *std::move(normalizers);
    auto pre = PreTokenizers::FromJson(tokenizer.value("pre_tokenizer", nlohmann::json()));
    if (!pre.ok()) return pre.status();
    t->pre_tokenizers_ = *std::move(pre);
    auto decoders = Decoders::FromJson(tokenizer.value("decoder", nlohmann::json()));
    if (!decoders.ok()) return decoders.status();
    t->decoders_ = *std::move(decoders);
    if (absl::Status s = t->LoadPostProcessor(tokenizer.value("post_processor", nlohmann::json())); !s.ok()) return s;
    t->vocab_size_ = t->model_->size();
    for (const hf::AddedToken& token : t->added_.tokens()) t->vocab_size_ = std::max(t->vocab_size_, token.id + 1);
    for (const std::vector<int32_t>* ids : {&t->prefix_ids_, &t->suffix_ids_}) {
      for (const int32_t id : *ids) {
        if (id >= t->vocab_size_) {
          return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: TemplateProcessing adds token id ", id,
                                                         ", outside the vocabulary of ", t->vocab_size_));
        }
      }
    }
    t->bos_id_ = t->IdOf(ConfigToken(config, "bos_token"));
    if (t->bos_id_ < 0 && !t->prefix_ids_.empty()) t->bos_id_ = t->prefix_ids_.front();
    t->eos_id_ = t->IdOf(ConfigToken(config, "eos_token"));
    return t;
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids;
    if (add_bos) ids = prefix_ids_;
    for (const hf::TextSegment& segment : added_.Split(text)) {
      if (segment.added_id >= 0) {
        ids.push_back(segment.added_id);
        continue;
      }
      const std::string normalized = normalizers_.Apply(std::string(segment.text));
      for (const hf::PreToken& word : pre_tokenizers_.Apply({normalized, segment.begin == 0})) {
        model_->EncodeWord(word.text, &ids);
      }
    }
    if (add_bos) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
    return ids;
  }

  std::string Decode(const std::vector<int32_t>& ids) const override { return Sanitize(DecodeBytes(ids)); }

  std::string DecodeIncremental(const std::vector<int32_t>& previous, int32_t next) const override {
    // Decode a window before `next` with and without it; the new complete characters are the
    // difference. Bytes of a character cut short were held back by earlier calls
    // and come out with the token that completes them.
    // A window must not start where the decoders would treat its start as the text's start:
    // with a Strip over merged text (Llama-2's tokenizer.json strips one leading space) the window
    // is the whole sequence, an O(length) decode per token, so that stripping happens only where
    // decoding the whole sequence does it.
    size_t start = previous.size(), visible = 0;
    if (decoders_.DependsOnWholeText()) start = 0;
    while (start > 0 && visible < kIncrementalContext) {
      --start;
      if (!IsSpecial(previous[start])) ++visible;
    }
    std::vector<int32_t> window(previous.begin() + static_cast<std::ptrdiff_t>(start), previous.end());
    const std::string before = DecodeBytes(window);
    window.push_back(next);
    const std::string after = DecodeBytes(window);
    const size_t done = CompleteLength(before), now = CompleteLength(after);
    if (now <= done || after.compare(0, done, before, 0, done) != 0) return "";
    return Sanitize(std::string_view(after).substr(done, now - done));
  }

  int32_t vocab_size() const override { return vocab_size_; }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  std::string_view Piece(int32_t id) const override {
    if (const hf::AddedToken* token = added_.Find(id); token != nullptr) return token->content;
    return model_->IdToToken(id);
  }

 private:
  HfTokenizer() = default;

  int32_t IdOf(std::string_view token) const {
    if (token.empty()) return -1;
    const int32_t added = added_.IdOf(token);
    return added >= 0 ? added : model_->TokenToId(token);
  }

  bool IsSpecial(int32_t id) const {
    const hf::AddedToken* token = added_.Find(id);
    return token != nullptr && token->special;
  }

  // Decoded bytes of `ids` with special tokens skipped; may end inside a character.
  std::string DecodeBytes(const std::vector<int32_t>& ids) const {
    std::vector<hf::DecodePiece> pieces;
    pieces.reserve(ids.size());
    for (const int32_t id : ids) {
      if (const hf::AddedToken* token = added_.Find(id); token != nullptr) {
        if (!token->special) pieces.push_back({token->content, true});
        continue;
      }
      const std::string_view text = model_->IdToToken(id);
      if (!text.empty()) pieces.push_back({std::string(text), false});
    }
    return decoders_.Apply(std::move(pieces));
  }

  // TemplateProcessing's single-sequence template (prefix and suffix special tokens); a
  // ByteLevel post-processor only adjusts offsets and adds nothing.
  absl::Status LoadPostProcessor(const nlohmann::json& config) {
    if (config.is_null()) return absl::OkStatus();
    const std::string type = config.value("type", std::string());
    if (type == "ByteLevel") return absl::OkStatus();
    if (type == "Sequence") {
      for (const nlohmann::json& child : config.value("processors", nlohmann::json::array())) {
        if (absl::Status s = LoadPostProcessor(child); !s.ok()) return s;
      }
      return absl::OkStatus();
    }
    if (type != "TemplateProcessing") {
      return absl::UnimplementedError(absl::StrCat("tokenizer.json: post_processor \"", type, "\" is not supported"));
    }
    const nlohmann::json specials = config.value("special_tokens", nlohmann::json::object());
    bool seen_sequence = false;
    for (const nlohmann::json& item : config.value("single", nlohmann::json::array())) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id")) {
        return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: bad TemplateProcessing item ", item.dump()));
      }
      const std::string name = item["SpecialToken"]["id"].get<std::string>();
      if (!specials.contains(name) || !specials[name].contains("ids")) {
        return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: TemplateProcessing names unknown special token \"", name, "\""));
      }
      for (const nlohmann::json& id : specials[name]["ids"]) {
        if (!id.is_number_unsigned() || id.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
          return absl::InvalidArgumentError(
              absl::StrCat("tokenizer.json: TemplateProcessing token \"", name, "\" has id ", id.dump(), ", not a token id"));
        }
        (seen_sequence ? suffix_ids_ : prefix_ids_).push_back(static_cast<int32_t>(id.get<uint64_t>()));
      }
    }
    return absl::OkStatus();
  }

  std::unique_ptr<BpeModel> model_;
  AddedTokens added_;
  Normalizers normalizers_;
  PreTokenizers pre_tokenizers_;
  Decoders decoders_;
  std::vector<int32_t> prefix_ids_, suffix_ids_;
  int32_t vocab_size_ = 0;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
};

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in.good() && !in.eof()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  return bytes.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizerFromJson(std::string_view tokenizer_json,
                                                                   std::string_view tokenizer_config_json) {
  nlohmann::json tokenizer = nlohmann::json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (tokenizer.is_discarded() || !tokenizer.is_object()) {
    return absl::InvalidArgumentError("tokenizer.json is not a JSON object");
  }
  nlohmann::json config = nlohmann::json::object();
  if (!tokenizer_config_json.empty()) {
    config = nlohmann::json::parse(tokenizer_config_json, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) {
      return absl::InvalidArgumentError("tokenizer_config.json is not a JSON object");
    }
  }
  // Every lookup below uses value()/contains(); a wrongly typed field still throws inside
  // nlohmann, which becomes an error here instead of escaping the library.
  try {
    auto created = HfTokenizer::Create(tokenizer, config);
    if (!created.ok()) return created.status();
    return std::unique_ptr<Tokenizer>(std::move(*created));
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& path) {
  absl::StatusOr<std::string> json = ReadFile(path);
  if (!json.ok()) return json.status();
  const std::string config_path = (std::filesystem::path(path).parent_path() / "tokenizer_config.json").string();
  std::string config;
  if (std::filesystem::exists(config_path)) {
    absl::StatusOr<std::string> read = ReadFile(config_path);
    if (!read.ok()) return read.status();
    config = *std::move(read);
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadHfTokenizerFromJson(*json, config);
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(), absl::StrCat(path, ": ", tokenizer.status().message()));
  }
  return tokenizer;
}

}  // namespace splitspec::engine
