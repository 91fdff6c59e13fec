// Added-token matching with a byte trie (see added_tokens.h).
#include "common/engine/tokenizer/hf/added_tokens.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "common/engine/tokenizer/hf/unicode_props.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine::hf {
namespace {

bool IsWordByte(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }
bool IsSpaceByte(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

absl::StatusOr<AddedTokens> AddedTokens::FromJson(const nlohmann::json& added_tokens) {
  AddedTokens out;
  out.trie_.emplace_back();
  if (added_tokens.is_null()) return out;
  if (!added_tokens.is_array()) return absl::InvalidArgumentError("tokenizer.json: \"added_tokens\" is not a list");
  for (const nlohmann::json& entry : added_tokens) {
    if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string() ||
        !entry.contains("id") || !entry["id"].is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: bad added token ", entry.dump()));
    }
    AddedToken token;
    token.content = entry["content"].get<std::string>();
    token.id = entry["id"].get<int32_t>();
    token.special = entry.value("special", false);
    token.lstrip = entry.value("lstrip", false);
    token.rstrip = entry.value("rstrip", false);
    token.single_word = entry.value("single_word", false);
    if (token.content.empty()) return absl::InvalidArgumentError("tokenizer.json: an added token is empty");
    const int32_t index = static_cast<int32_t>(out.tokens_.size());
    if (!out.index_of_id_.emplace(token.id, index).second) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: added token id ", token.id, " repeats"));
    }
    int32_t node = 0;
    for (unsigned char c : token.content) {
      auto it = out.trie_[node].children.find(c);
      if (it == out.trie_[node].children.end()) {
        out.trie_.emplace_back();
        it = out.trie_[node].children.emplace(c, static_cast<int32_t>(out.trie_.size() - 1)).first;
      }
      node = it->second;
    }
    out.trie_[node].token = index;
    out.tokens_.push_back(std::move(token));
  }
  return out;
}

const AddedToken* AddedTokens::Find(int32_t id) const {
  auto it = index_of_id_.find(id);
  return it == index_of_id_.end() ? nullptr : &tokens_[it->second];
}

int32_t AddedTokens::IdOf(std::string_view content) const {
  int32_t node = 0;
  for (unsigned char c : content) {
    auto it = trie_[node].children.find(c);
    if (it == trie_[node].children.end()) return -1;
    node = it->second;
  }
  return trie_[node].token < 0 ? -1 : tokens_[trie_[node].token].id;
}

int AddedTokens::LongestAt(std::string_view text, size_t at) const {
  int best = -1;
  int32_t node = 0;
  for (size_t i = at; i < text.size(); ++i) {
    auto it = trie_[node].children.find(static_cast<unsigned char>(text[i]));
    if (it == trie_[node].children.end()) break;
    node = it->second;
    if (trie_[node].token >= 0 && Acceptable(tokens_[trie_[node].token], text, at, i + 1)) best = trie_[node].token;
  }
  return best;
}

bool AddedTokens::Acceptable(const AddedToken& token, std::string_view text, size_t begin, size_t end) const {
  if (!token.single_word) return true;
  const bool word_before = begin > 0 && IsWordByte(static_cast<unsigned char>(text[begin - 1]));
  const bool word_after = end < text.size() && IsWordByte(static_cast<unsigned char>(text[end]));
  return !word_before && !word_after;
}

std::vector<TextSegment> AddedTokens::Split(std::string_view text) const {
  std::vector<TextSegment> segments;
  size_t plain_begin = 0;
  auto flush_plain = [&](size_t end) {
    if (end > plain_begin) segments.push_back({text.substr(plain_begin, end - plain_begin), -1, plain_begin});
  };
  for (size_t at = 0; at < text.size();) {
    const int index = trie_.size() > 1 ? LongestAt(text, at) : -1;
    if (index < 0) {
      ++at;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t begin = at, end = at + token.content.size();
    // lstrip / rstrip: the token swallows the whitespace around it.
    if (token.lstrip) {
      while (begin > plain_begin && IsSpaceByte(static_cast<unsigned char>(text[begin - 1]))) --begin;
    }
    if (token.rstrip) {
      while (end < text.size() && IsSpaceByte(static_cast<unsigned char>(text[end]))) ++end;
    }
    flush_plain(begin);
    segments.push_back({text.substr(at, token.content.size()), token.id, at});
    plain_begin = at = end;
  }
  flush_plain(text.size());
  return segments;
}

}  // namespace splitspec::engine::hf
