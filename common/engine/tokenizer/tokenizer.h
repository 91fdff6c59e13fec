// SentencePiece tokenizer read straight from tokenizer.model (a serialized ModelProto),
// implemented here because libsentencepiece cannot share a process with gRPC (see README).
// Supports the BPE model type with byte fallback, as Llama/TinyLlama/Mistral use, and
// unigram models as a fallback for other SentencePiece files.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_TOKENIZER_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace splitspec::engine {

// Thread-safe after construction: every method is const.
class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromFile(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromBytes(std::string_view serialized_model);
  virtual ~Tokenizer() = default;

  // Token ids of `text`, as `spm_encode --output_format=id` prints them, with BOS prepended
  // when `add_bos`.
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_bos) const = 0;
  // Text of `ids` (control tokens dropped, byte pieces reassembled, U+2581 -> space, the
  // leading space of the first piece removed), as `spm_decode` does.
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;
  // Text one token adds after `previous` tokens (for streaming), which handles byte pieces
  // that only form a character together and the dropped leading space.
  virtual std::string DecodeIncremental(const std::vector<int32_t>& previous, int32_t next) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if the model has none
  virtual int32_t eos_id() const = 0;  // -1 if the model has none
  virtual std::string_view Piece(int32_t id) const = 0;
};

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_TOKENIZER_H_
