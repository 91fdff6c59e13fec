// GPT-2 byte <-> code point tables (see byte_level.h).
#include "common/engine/tokenizer/hf/byte_level.h"

#include <array>

#include "common/engine/tokenizer/hf/unicode_props.h"

namespace splitspec::engine::hf {
namespace {

struct Tables {
  std::array<std::string, 256> byte_to_utf8;
  std::array<int, 0x200> char_to_byte;  // every mapped code point is below U+0200
};

const Tables& GetTables() {
  static const Tables* tables = [] {
    auto* t = new Tables;
    t->char_to_byte.fill(-1);
    auto keeps_itself = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const char32_t c = keeps_itself(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      AppendUtf8(c, &t->byte_to_utf8[b]);
      t->char_to_byte[c] = b;
    }
    return t;
  }();
  return *tables;
}

}  // namespace

void AppendByteLevel(std::string_view bytes, std::string* out) {
  const Tables& t = GetTables();
  for (unsigned char b : bytes) out->append(t.byte_to_utf8[b]);
}

void AppendBytesOfByteLevel(std::string_view byte_level, std::string* out) {
  const Tables& t = GetTables();
  for (const CodePoint& p : DecodeUtf8(byte_level)) {
    if (p.value < t.char_to_byte.size() && t.char_to_byte[p.value] >= 0) {
      out->push_back(static_cast<char>(t.char_to_byte[p.value]));
    } else {
      AppendUtf8(p.value, out);
    }
  }
}

}  // namespace splitspec::engine::hf
