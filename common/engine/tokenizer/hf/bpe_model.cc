// BPE merges over one word with a heap of candidate pairs (see bpe_model.h).
#include "common/engine/tokenizer/hf/bpe_model.h"

#include <queue>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/engine/tokenizer/utf8.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine::hf {

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const nlohmann::json& model) {
  if (!model.is_object()) return absl::InvalidArgumentError("tokenizer.json: \"model\" is not an object");
  const std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") {
    return absl::UnimplementedError(absl::StrCat("tokenizer.json: model type \"", type,
                                                 "\" is not supported (only BPE)"));
  }
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0) {
    return absl::UnimplementedError("tokenizer.json: BPE dropout is not supported");
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(affix) && model[affix].is_string() && !model[affix].get<std::string>().empty()) {
      return absl::UnimplementedError(absl::StrCat("tokenizer.json: BPE ", affix, " is not supported"));
    }
  }
  std::unique_ptr<BpeModel> bpe(new BpeModel);
  bpe->byte_fallback_ = model.value("byte_fallback", false);
  bpe->fuse_unk_ = model.value("fuse_unk", false);
  bpe->ignore_merges_ = model.value("ignore_merges", false);
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return absl::InvalidArgumentError("tokenizer.json: BPE model has no \"vocab\" object");
  }
  if (absl::Status s = bpe->LoadVocab(model["vocab"]); !s.ok()) return s;
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    bpe->unk_id_ = bpe->TokenToId(model["unk_token"].get<std::string>());
    if (bpe->unk_id_ < 0) return absl::InvalidArgumentError("tokenizer.json: unk_token is not in the vocabulary");
  }
  if (absl::Status s = bpe->LoadMerges(model.value("merges", nlohmann::json::array())); !s.ok()) return s;
  for (int b = 0; b < 256; ++b) bpe->byte_ids_[b] = bpe->TokenToId(absl::StrFormat("<0x%02X>", b));
  return bpe;
}

absl::Status BpeModel::LoadVocab(const nlohmann::json& vocab) {
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 24)) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: bad id for vocab token \"", token, "\""));
    }
    max_id = std::max<int64_t>(max_id, id.get<int64_t>());
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [token, id] : vocab.items()) id_to_token_[id.get<size_t>()] = token;
  // Views are taken only now: the strings no longer move.
  token_to_id_.reserve(id_to_token_.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!token_to_id_.emplace(id_to_token_[id.get<size_t>()], id.get<int32_t>()).second) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: duplicate vocab token \"", token, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status BpeModel::LoadMerges(const nlohmann::json& merges) {
  if (!merges.is_array()) return absl::InvalidArgumentError("tokenizer.json: BPE \"merges\" is not a list");
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const nlohmann::json& merge : merges) {
    std::string left, right;
    // Older files write "a b"; newer ones ["a", "b"] (which allows spaces inside tokens).
    if (merge.is_string()) {
      const std::string& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ', 1);
      if (space == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: bad merge \"", text, "\""));
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: bad merge ", merge.dump()));
    }
    const int32_t left_id = TokenToId(left), right_id = TokenToId(right), merged_id = TokenToId(left + right);
    if (left_id < 0 || right_id < 0 || merged_id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: merge \"", left, " ", right, "\" uses tokens outside the vocabulary"));
    }
    merges_.emplace(PairKey(left_id, right_id), Merge{rank++, merged_id});  // first rank wins
  }
  return absl::OkStatus();
}

int32_t BpeModel::TokenToId(std::string_view token) const {
  auto it = token_to_id_.find(token);
  return it == token_to_id_.end() ? -1 : it->second;
}

std::string_view BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || id >= size()) return {};
  return id_to_token_[id];
}

int BpeModel::ByteOf(int32_t id) const {
  const std::string_view token = IdToToken(id);
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  int value = 0;
  for (char h : token.substr(3, 2)) {
    value *= 16;
    if (h >= '0' && h <= '9') value += h - '0';
    else if (h >= 'A' && h <= 'F') value += h - 'A' + 10;
    else return -1;
  }
  return value;
}

void BpeModel::InitialSymbols(std::string_view word, std::vector<int32_t>* symbols) const {
  bool previous_unk = false;
  while (!word.empty()) {
    size_t length = 1;
    tokenizer_internal::DecodeValidUtf8Prefix(word, &length);
    const std::string_view ch = word.substr(0, length);
    word.remove_prefix(length);
    if (const int32_t id = TokenToId(ch); id >= 0) {
      symbols->push_back(id);
      previous_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes = true;
      for (unsigned char b : ch) all_bytes = all_bytes && byte_ids_[b] >= 0;
      if (all_bytes) {
        for (unsigned char b : ch) symbols->push_back(byte_ids_[b]);
        previous_unk = false;
        continue;
      }
    }
    if (unk_id_ < 0) continue;  // no way to spell it: dropped, as the reference does
    if (!(fuse_unk_ && previous_unk)) symbols->push_back(unk_id_);
    previous_unk = true;
  }
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const int32_t id = TokenToId(word); id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  std::vector<int32_t> symbols;
  InitialSymbols(word, &symbols);
  const int n = static_cast<int>(symbols.size());
  if (n <= 1) {
    ids->insert(ids->end(), symbols.begin(), symbols.end());
    return;
  }
  // Doubly linked symbols; a merged-away symbol gets id -1.
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
  // Candidates (rank, left position, left id, right id): stale ones are skipped when popped.
  using Candidate = std::tuple<int32_t, int, int32_t, int32_t>;
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto consider = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    auto it = merges_.find(PairKey(symbols[left], symbols[next[left]]));
    if (it != merges_.end()) heap.emplace(it->second.rank, left, symbols[left], symbols[next[left]]);
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const auto [rank, left, left_id, right_id] = heap.top();
    heap.pop();
    const int right = next[left];
    if (symbols[left] != left_id || right < 0 || symbols[right] != right_id) continue;
    symbols[left] = merges_.find(PairKey(left_id, right_id))->second.merged_id;
    symbols[right] = -1;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    consider(prev[left]);
    consider(left);
  }
  for (int i = 0; i >= 0; i = next[i]) ids->push_back(symbols[i]);
}

}  // namespace splitspec::engine::hf
