// Fuzz target: tokenizer.json bytes (Hugging Face's format: added tokens, normalizers,
// pre-tokenizers with their regexes, a BPE model, decoders). Loading returns an error or a
// tokenizer that encodes and decodes text with ids in range, without crashing, and whose
// streaming decode shows what the whole decode shows.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/engine/tokenizer/hf/hf_tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::unique_ptr<splitspec::engine::Tokenizer>> tokenizer =
      splitspec::engine::LoadHfTokenizerFromJson(bytes, "");
  if (!tokenizer.ok()) return 0;
  const splitspec::engine::Tokenizer& t = **tokenizer;
  FUZZ_CHECK(t.vocab_size() > 0);
  const std::string text = "Hello  world\n\tdef f(x):  return x \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80 <|end|> 12345 \xFF end";
  const std::vector<int32_t> ids = t.Encode(text, /*add_bos=*/true);
  for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < t.vocab_size());
  const std::string decoded = t.Decode(ids);
  std::string streamed;
  std::vector<int32_t> previous;
  for (int32_t id : ids) {
    streamed += t.DecodeIncremental(previous, id);
    previous.push_back(id);
  }
  // Only a character left unfinished at the very end may still be held back by the stream.
  if (decoded.compare(0, streamed.size(), streamed) != 0) {
    std::fprintf(stderr, "decoded:  %s\nstreamed: %s\n", absl::CEscape(decoded).c_str(), absl::CEscape(streamed).c_str());
  }
  FUZZ_CHECK(decoded.compare(0, streamed.size(), streamed) == 0);
  std::vector<int32_t> all;
  for (int32_t id = -2; id < t.vocab_size() + 2 && id < 4096; ++id) all.push_back(id);
  (void)t.Decode(all);
  return 0;
}
