// UTF-8 decoding rules mirrored from SentencePiece's string_util.
#include "common/engine/tokenizer/utf8.h"

#include <algorithm>
#include <cstdint>

namespace splitspec::engine::tokenizer_internal {
namespace {

bool IsTrail(uint8_t c) { return (c & 0xC0) == 0x80; }

bool IsValidCodepoint(uint32_t c) { return c < 0xD800 || (c >= 0xE000 && c <= 0x10FFFF); }

}  // namespace

size_t OneCharLen(std::string_view text) {
  // Lengths by the high nibble of the lead byte; continuation bytes count as 1.
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  const size_t len = kLen[static_cast<uint8_t>(text[0]) >> 4];
  return std::min(len, text.size());
}

bool DecodeValidUtf8Prefix(std::string_view text, size_t* length) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  *length = 1;
  if (s[0] < 0x80) return true;
  if (n >= 2 && (s[0] & 0xE0) == 0xC0) {
    const uint32_t cp = ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu);
    if (IsTrail(s[1]) && cp >= 0x80 && IsValidCodepoint(cp)) {
      *length = 2;
      return true;
    }
  } else if (n >= 3 && (s[0] & 0xF0) == 0xE0) {
    const uint32_t cp = ((s[0] & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
    if (IsTrail(s[1]) && IsTrail(s[2]) && cp >= 0x800 && IsValidCodepoint(cp)) {
      *length = 3;
      return true;
    }
  } else if (n >= 4 && (s[0] & 0xF8) == 0xF0) {
    const uint32_t cp = ((s[0] & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) |
                        ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
    if (IsTrail(s[1]) && IsTrail(s[2]) && IsTrail(s[3]) && cp >= 0x10000 &&
        IsValidCodepoint(cp)) {
      *length = 4;
      return true;
    }
  }
  return false;
}

bool IsIncompleteUtf8(std::string_view text) {
  if (text.empty()) return false;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  size_t need = 0;
  if ((s[0] & 0xE0) == 0xC0) {
    need = 2;
  } else if ((s[0] & 0xF0) == 0xE0) {
    need = 3;
  } else if ((s[0] & 0xF8) == 0xF0) {
    need = 4;
  } else {
    return false;
  }
  if (text.size() >= need) return false;
  for (size_t i = 1; i < text.size(); ++i) {
    if (!IsTrail(s[i])) return false;
  }
  // Reject prefixes that no continuation can make valid (overlong, surrogate, > U+10FFFF),
  // so such bytes are shown as U+FFFD at once instead of being held back forever.
  if (need == 2) return s[0] >= 0xC2;
  if (need == 3) {
    if (text.size() >= 2) {
      if (s[0] == 0xE0 && s[1] < 0xA0) return false;  // overlong
      if (s[0] == 0xED && s[1] >= 0xA0) return false;  // surrogate
    }
    return true;
  }
  if (s[0] > 0xF4) return false;
  if (text.size() >= 2) {
    if (s[0] == 0xF0 && s[1] < 0x90) return false;  // overlong
    if (s[0] == 0xF4 && s[1] >= 0x90) return false;  // past U+10FFFF
  }
  return true;
}

}  // namespace splitspec::engine::tokenizer_internal
