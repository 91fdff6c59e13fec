// The "BPE" model of tokenizer.json: a vocabulary and ranked merges applied to one
// pre-tokenized word at a time, lowest rank first (leftmost among equal ranks), with the
// options Llama-2/Gemma (byte_fallback, fuse_unk) and Llama-3 (ignore_merges) files set.
#ifndef SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_BPE_MODEL_H_
#define SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_BPE_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace splitspec::engine::hf {

// Immutable after FromJson(); thread-safe.
class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object; other model types are an error naming them.
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const nlohmann::json& model);

  // Appends the ids of one word (text the pre-tokenizer produced).
  void EncodeWord(std::string_view word, std::vector<int32_t>* ids) const;

  // -1 when absent.
  int32_t TokenToId(std::string_view token) const;
  // Empty for ids outside the vocabulary.
  std::string_view IdToToken(int32_t id) const;
  int32_t size() const { return static_cast<int32_t>(id_to_token_.size()); }
  // Byte value of a "<0xAB>" byte-fallback token, or -1.
  int ByteOf(int32_t id) const;

 private:
  BpeModel() = default;
  absl::Status LoadVocab(const nlohmann::json& vocab);
  absl::Status LoadMerges(const nlohmann::json& merges);
  // Initial symbols of `word`: one per character, byte tokens or <unk> for unknown ones.
  void InitialSymbols(std::string_view word, std::vector<int32_t>* symbols) const;

  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  std::vector<std::string> id_to_token_;
  absl::flat_hash_map<std::string_view, int32_t> token_to_id_;  // views into id_to_token_
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};  // -1 where a byte has no token
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  int32_t unk_id_ = -1;
};

}  // namespace splitspec::engine::hf

#endif  // SPLITSPEC_COMMON_ENGINE_TOKENIZER_HF_BPE_MODEL_H_
