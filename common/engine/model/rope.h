// Rotary-embedding frequencies for a model config, including Llama-3 frequency scaling.
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_ROPE_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_ROPE_H_

#include "common/engine/backend.h"
#include "common/engine/model/model_config.h"

namespace splitspec::engine {

// inv_freq[i] = theta^(-2i/head_dim), then, with llama3 scaling, long wavelengths divided by
// `factor` and the band between the low/high-frequency wavelengths interpolated smoothly.
RopeTables MakeRopeTables(const ModelConfig& config);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_ROPE_H_
