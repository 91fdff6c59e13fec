// Fuzz target: tokenizer.model bytes (a serialized SentencePiece ModelProto, read by our own
// wire reader). Loading returns an error or a tokenizer that encodes and decodes text, ids in
// range, without crashing; streaming decode adds up to the whole decode.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using splitspec::engine::Tokenizer;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::LoadFromBytes(bytes);
  if (!tokenizer.ok()) return 0;
  const Tokenizer& t = **tokenizer;
  FUZZ_CHECK(t.vocab_size() > 0);
  // Text with ASCII, whitespace runs, multi-byte UTF-8 and an invalid byte.
  const std::string text = "Hello  world\n\tdef f(x):  return x \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80 \xFF end";
  const std::vector<int32_t> ids = t.Encode(text, /*add_bos=*/true);
  for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < t.vocab_size());
  (void)t.Decode(ids);
  // Every id, and a few outside the vocabulary, decode without crashing.
  std::vector<int32_t> all;
  for (int32_t id = -2; id < t.vocab_size() + 2 && id < 4096; ++id) all.push_back(id);
  (void)t.Decode(all);
  std::vector<int32_t> previous;
  for (int32_t id : ids) {
    (void)t.DecodeIncremental(previous, id);
    previous.push_back(id);
  }
  for (int32_t id = 0; id < t.vocab_size() && id < 4096; ++id) (void)t.Piece(id);
  return 0;
}
