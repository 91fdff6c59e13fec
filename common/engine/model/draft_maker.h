// Layer-truncated self-speculative drafts (`splitspec make-model --draft-of`): a copy of a
// target model keeping its embeddings, first N decoder layers, final norm, head and tokenizer.
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_DRAFT_MAKER_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_DRAFT_MAKER_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/engine/model/model_maker.h"

namespace splitspec::engine {

// Reads `target_dir` (config.json, single or sharded safetensors, tokenizer.model) and writes
// `out_dir` with num_hidden_layers = `n_layers`; tensors are copied byte for byte, or, with
// `dtype`, stored in that file dtype (F32, F16 or BF16; each value through F32, rounded to
// nearest even), which with all the layers converts a model. The draft's config.json is the
// target's with only num_hidden_layers (and torch_dtype, with `dtype`) changed.
// INVALID_ARGUMENT unless 1 <= n_layers <= the target's layers; load errors of the target
// (missing tensor, wrong shape, bad config) are returned as they are.
absl::Status MakeDraftModel(const std::string& target_dir, int n_layers, const std::string& out_dir,
                            const MakeProgress& progress = {}, std::optional<DType> dtype = std::nullopt);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_DRAFT_MAKER_H_
