// Text normalization before segmentation, as SentencePiece's Normalizer does it: the
// precompiled character map (a Darts double-array trie of rewrite rules, e.g. nmt_nfkc),
// whitespace collapsing, the dummy prefix and the U+2581 whitespace escape. Also the matcher
// of user-defined symbols, which both normalization and segmentation must keep intact.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_NORMALIZER_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_NORMALIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "common/engine/tokenizer/model_proto.h"

namespace splitspec::engine::tokenizer_internal {

// Longest-prefix matcher over the user-defined symbols. Immutable after construction.
class PrefixMatcher {
 public:
  PrefixMatcher() = default;
  explicit PrefixMatcher(const std::vector<std::string>& symbols);

  bool empty() const { return symbols_.empty(); }
  // Length of the longest symbol that prefixes `text`, or 0.
  size_t LongestMatch(std::string_view text) const;

 private:
  absl::flat_hash_set<std::string> symbols_;
  size_t max_length_ = 0;
};

// Immutable after Create(); thread-safe. Holds a pointer to `user_defined`, which must outlive it.
class Normalizer {
 public:
  static absl::StatusOr<Normalizer> Create(const SpmNormalizerSpec& spec,
                                           bool treat_whitespace_as_suffix,
                                           const PrefixMatcher* user_defined);

  // The normalized form of `input` that segmentation works on.
  std::string Normalize(std::string_view input) const;

 private:
  Normalizer() = default;

  // Rewrites the start of `input`: returns the replacement text and how many input bytes it
  // consumed (at least 1).
  std::pair<std::string_view, size_t> NormalizePrefix(std::string_view input) const;
  // Longest charsmap rule matching a prefix of `input`: (length, offset into normalized_), or
  // length 0 when none matches.
  std::pair<size_t, uint32_t> LongestRule(std::string_view input) const;

  SpmNormalizerSpec spec_;
  bool treat_whitespace_as_suffix_ = false;
  const PrefixMatcher* user_defined_ = nullptr;
  std::vector<uint32_t> trie_;  // Darts-clone double-array units; empty: no rules
  std::string normalized_;      // NUL-separated replacement strings the trie values index
};

}  // namespace splitspec::engine::tokenizer_internal

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_NORMALIZER_H_
