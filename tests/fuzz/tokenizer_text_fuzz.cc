// Fuzz target: prompt text (any bytes) through the bundled tokenizer, as the router tokenizes
// a client's prompt. Ids stay in the vocabulary, valid UTF-8 survives encode + decode exactly,
// and streaming the ids one by one shows the same text as decoding them at once.
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

const splitspec::engine::Tokenizer& BundledTokenizer() {
  static const splitspec::engine::Tokenizer* tokenizer = [] {
    auto loaded = splitspec::engine::Tokenizer::LoadFromFile(SPLITSPEC_TOKENIZER_MODEL);
    if (!loaded.ok()) {
      std::fprintf(stderr, "cannot load %s\n", SPLITSPEC_TOKENIZER_MODEL);
      std::abort();
    }
    return loaded->release();
  }();
  return *tokenizer;
}

// Valid UTF-8 without NUL and without U+2581: text that encode + decode must give back exactly.
bool IsPlainUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || c == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const unsigned char cc = s[i + k];
      if ((cc & 0xC0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3F);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    // U+2581 is SentencePiece's escaped space: it decodes as ' ', as spm_decode does.
    if (cp == 0x2581) return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const splitspec::engine::Tokenizer& t = BundledTokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<int32_t> ids = t.Encode(text, /*add_bos=*/false);
  for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < t.vocab_size());
  const std::string decoded = t.Decode(ids);
  std::string streamed;
  std::vector<int32_t> previous;
  for (int32_t id : ids) {
    streamed += t.DecodeIncremental(previous, id);
    previous.push_back(id);
  }
  // Bytes of an unfinished character at the very end are shown by Decode (as U+FFFD) but
  // still wait in a stream; everything before them is the same.
  FUZZ_CHECK(decoded.compare(0, streamed.size(), streamed) == 0);
  if (IsPlainUtf8(text)) {
    FUZZ_CHECK(streamed == decoded);
    FUZZ_CHECK(decoded == text);
  }
  return 0;
}
