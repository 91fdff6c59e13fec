// Plain autoregressive generation on the engine: the target-only baseline that every
// speculative path must reproduce token for token, and the engine's `generate` tool.
#ifndef SPLITSPEC_COMMON_ENGINE_GENERATION_GENERATE_H_
#define SPLITSPEC_COMMON_ENGINE_GENERATION_GENERATE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/model/llama_model.h"
#include "common/engine/sampling/sampler.h"

namespace splitspec::engine {

struct GenerateOptions {
  int max_tokens = 64;
  SamplingParams sampling;
  int32_t eos_id = -1;  // stop after emitting it; -1 = never
  // Called with each generated token as it is produced; return false to stop early.
  std::function<bool(int32_t token)> on_token;
};

// Prefills `prompt` into a fresh sequence of `kv` and decodes one token per step, until
// max_tokens, eos, or the model's context (config().max_position_embeddings) is full: as in the
// verifier, a forward feeds positions below it, so at most context - prompt + 1 tokens come.
// The sequence is released before returning. INVALID_ARGUMENT for an empty prompt, OUT_OF_RANGE
// for a prompt of context tokens or more.
absl::StatusOr<std::vector<int32_t>> GenerateTokens(LlamaModel& model, KvCache& kv,
                                                    const std::vector<int32_t>& prompt,
                                                    const GenerateOptions& options);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_GENERATION_GENERATE_H_
