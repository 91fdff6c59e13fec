// Plain autoregressive generation (see generate.h).
#include "common/engine/generation/generate.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace splitspec::engine {

absl::StatusOr<std::vector<int32_t>> GenerateTokens(LlamaModel& model, KvCache& kv,
                                                    const std::vector<int32_t>& prompt,
                                                    const GenerateOptions& options) {
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens");
  // The verifier's rule (VerifierCore): a forward feeds positions below the model's context.
  const int64_t context = model.config().max_position_embeddings;
  if (static_cast<int64_t>(prompt.size()) >= context) {
    return absl::OutOfRangeError(absl::StrCat("the prompt has ", prompt.size(), " tokens; the model's context is ",
                                              context));
  }
  if (absl::Status valid = ValidateSamplingParams(options.sampling); !valid.ok()) return valid;
  // A sequence id no caller uses: the top of the id space.
  const SeqId seq = std::numeric_limits<SeqId>::max();
  if (absl::Status added = kv.AddSequence(seq); !added.ok()) return added;
  Rng rng(options.sampling.seed);
  std::vector<int32_t> generated;
  SequenceStep step{seq, prompt, {}, {static_cast<int32_t>(prompt.size()) - 1}};
  int64_t fed = static_cast<int64_t>(prompt.size());
  absl::Status status;
  while (static_cast<int>(generated.size()) < options.max_tokens) {
    ForwardResult result;
    status = model.Forward({step}, kv, &result);
    if (!status.ok()) break;
    const int32_t token = SampleToken({result.Row(0), static_cast<size_t>(result.vocab_size)}, options.sampling, rng);
    generated.push_back(token);
    if (options.on_token && !options.on_token(token)) break;
    if (token == options.eos_id) break;
    if (fed == context) break;  // the context is full: the token has no position to be fed at
    step = SequenceStep{seq, {token}, {}, {0}};
    ++fed;
  }
  kv.Release(seq);
  if (!status.ok()) return status;
  return generated;
}

}  // namespace splitspec::engine
