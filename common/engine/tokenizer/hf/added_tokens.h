// tokenizer.json "added_tokens": found in raw text before anything else runs (leftmost,
// longest first, as the reference's Aho-Corasick matcher does), honouring lstrip / rstrip /
// single_word; special ones are dropped when decoding for display.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_ADDED_TOKENS_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_ADDED_TOKENS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace splitspec::engine::hf {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A stretch of input: an added token's id, or text for the normal pipeline (id -1).
struct TextSegment {
  std::string_view text;
  int32_t added_id = -1;
  size_t begin = 0;  // byte offset in the input
};

// Immutable after FromJson(); thread-safe.
class AddedTokens {
 public:
  static absl::StatusOr<AddedTokens> FromJson(const nlohmann::json& added_tokens);

  std::vector<TextSegment> Split(std::string_view text) const;
  // nullptr when `id` is not an added token.
  const AddedToken* Find(int32_t id) const;
  int32_t IdOf(std::string_view content) const;  // -1 when absent
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // Longest token starting at text[at], or -1 (index into tokens_).
  int LongestAt(std::string_view text, size_t at) const;
  bool Acceptable(const AddedToken& token, std::string_view text, size_t begin, size_t end) const;

  struct TrieNode {
    absl::flat_hash_map<unsigned char, int32_t> children;
    int32_t token = -1;
  };
  std::vector<AddedToken> tokens_;
  std::vector<TrieNode> trie_;
  absl::flat_hash_map<int32_t, int32_t> index_of_id_;
};

}  // namespace splitspec::engine::hf

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_ADDED_TOKENS_H_
