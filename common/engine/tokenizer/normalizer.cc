// Normalization rules: see normalizer.h. The charsmap blob is
//   uint32 trie_bytes (little-endian) | trie (trie_bytes / 4 units) | replacement strings,
// where each trie leaf's value is the offset of a NUL-terminated replacement string.
#include "common/engine/tokenizer/normalizer.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/engine/tokenizer/utf8.h"

namespace splitspec::engine::tokenizer_internal {
namespace {

// Accessors of a Darts-clone double-array unit.
bool UnitHasLeaf(uint32_t unit) { return (unit >> 8) & 1; }
uint32_t UnitValue(uint32_t unit) { return unit & ((1u << 31) - 1); }
uint32_t UnitLabel(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
uint32_t UnitOffset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

}  // namespace

PrefixMatcher::PrefixMatcher(const std::vector<std::string>& symbols) {
  for (const std::string& s : symbols) {
    symbols_.insert(s);
    max_length_ = std::max(max_length_, s.size());
  }
}

size_t PrefixMatcher::LongestMatch(std::string_view text) const {
  for (size_t len = std::min(max_length_, text.size()); len > 0; --len) {
    if (symbols_.contains(absl::string_view(text.data(), len))) return len;
  }
  return 0;
}

absl::StatusOr<Normalizer> Normalizer::Create(const SpmNormalizerSpec& spec,
                                              bool treat_whitespace_as_suffix,
                                              const PrefixMatcher* user_defined) {
  Normalizer n;
  n.spec_ = spec;
  n.spec_.precompiled_charsmap.clear();  // kept decoded below, not twice
  n.treat_whitespace_as_suffix_ = treat_whitespace_as_suffix;
  n.user_defined_ = user_defined;
  const std::string& blob = spec.precompiled_charsmap;
  if (blob.empty()) return n;
  if (blob.size() <= 4) {
    return absl::DataLossError("normalizer charsmap is shorter than its header");
  }
  uint32_t trie_bytes = 0;
  std::memcpy(&trie_bytes, blob.data(), 4);
  if (trie_bytes > blob.size() - 4 || trie_bytes % 4 != 0 || trie_bytes == 0) {
    return absl::DataLossError(absl::StrCat("normalizer charsmap trie size ", trie_bytes,
                                            " does not fit its ", blob.size(), "-byte blob"));
  }
  n.trie_.resize(trie_bytes / 4);
  std::memcpy(n.trie_.data(), blob.data() + 4, trie_bytes);
  n.normalized_ = blob.substr(4 + trie_bytes);
  return n;
}

std::pair<size_t, uint32_t> Normalizer::LongestRule(std::string_view input) const {
  std::pair<size_t, uint32_t> best{0, 0};
  const size_t n_units = trie_.size();
  size_t node = UnitOffset(trie_[0]);
  for (size_t i = 0; i < input.size(); ++i) {
    const uint8_t c = static_cast<uint8_t>(input[i]);
    node ^= c;
    if (node >= n_units) break;  // a malformed trie points outside itself: no match
    const uint32_t unit = trie_[node];
    if (UnitLabel(unit) != c) break;
    node ^= UnitOffset(unit);
    if (node >= n_units) break;
    if (UnitHasLeaf(unit)) best = {i + 1, UnitValue(trie_[node])};
  }
  return best;
}

std::pair<std::string_view, size_t> Normalizer::NormalizePrefix(std::string_view input) const {
  if (user_defined_ != nullptr && !user_defined_->empty()) {
    if (const size_t len = user_defined_->LongestMatch(input); len > 0) {
      return {input.substr(0, len), len};
    }
  }
  if (!trie_.empty()) {
    const auto [length, offset] = LongestRule(input);
    if (length > 0 && offset < normalized_.size()) {
      const char* start = normalized_.data() + offset;
      const size_t max_len = normalized_.size() - offset;
      const void* nul = std::memchr(start, '\0', max_len);
      const size_t len = nul ? static_cast<const char*>(nul) - start : max_len;
      return {std::string_view(start, len), length};
    }
  }
  size_t length = 0;
  if (!DecodeValidUtf8Prefix(input, &length)) return {kReplacementChar, 1};
  return {input.substr(0, length), length};
}

std::string Normalizer::Normalize(std::string_view input) const {
  std::string out;
  if (input.empty()) return out;
  const bool remove_extra = spec_.remove_extra_whitespaces;
  const bool escape = spec_.escape_whitespaces;
  if (remove_extra) {
    // Leading whitespace (after normalization) is dropped.
    while (!input.empty()) {
      const auto [text, consumed] = NormalizePrefix(input);
      if (text != " ") break;
      input.remove_prefix(consumed);
    }
    if (input.empty()) return out;
  }
  out.reserve(input.size() * 3);
  const std::string_view space = escape ? kSpaceSymbol : std::string_view(" ");
  if (!treat_whitespace_as_suffix_ && spec_.add_dummy_prefix) out.append(space);

  bool is_prev_space = remove_extra;
  while (!input.empty()) {
    const auto [normalized, consumed] = NormalizePrefix(input);
    std::string_view piece = normalized;
    if (is_prev_space) {
      while (!piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    }
    if (!piece.empty()) {
      for (const char c : piece) {
        if (escape && c == ' ') {
          out.append(kSpaceSymbol);
        } else {
          out.push_back(c);
        }
      }
      is_prev_space = piece.back() == ' ';
    }
    input.remove_prefix(consumed);
    if (!remove_extra) is_prev_space = false;
  }
  if (remove_extra) {
    while (out.size() >= space.size() &&
           std::string_view(out).substr(out.size() - space.size()) == space) {
      out.resize(out.size() - space.size());
    }
  }
  if (treat_whitespace_as_suffix_ && spec_.add_dummy_prefix) out.append(space);
  return out;
}

}  // namespace splitspec::engine::tokenizer_internal
