// Rotary-embedding frequency tables (see rope.h).
#include "common/engine/model/rope.h"

#include <cmath>

namespace splitspec::engine {

RopeTables MakeRopeTables(const ModelConfig& config) {
  RopeTables tables;
  tables.head_dim = config.head_dim;
  const int half = config.head_dim / 2;
  tables.inv_freq.resize(half);
  for (int i = 0; i < half; ++i) {
    // Computed in f32 as the reference frameworks do, so positions rotate by the same angles.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(config.head_dim);
    tables.inv_freq[i] = 1.0f / std::pow(config.rope_theta, exponent);
  }
  const Llama3RopeScaling& scaling = config.rope_scaling;
  if (!scaling.enabled) return tables;
  const float old_context = static_cast<float>(scaling.original_max_position_embeddings);
  const float low_freq_wavelen = old_context / scaling.low_freq_factor;
  const float high_freq_wavelen = old_context / scaling.high_freq_factor;
  for (float& freq : tables.inv_freq) {
    const float wavelen = 2.0f * static_cast<float>(M_PI) / freq;
    if (wavelen < high_freq_wavelen) continue;  // high frequencies keep their resolution
    if (wavelen > low_freq_wavelen) {
      freq /= scaling.factor;
      continue;
    }
    const float smooth =
        (old_context / wavelen - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor);
    freq = (1.0f - smooth) * freq / scaling.factor + smooth * freq;
  }
  return tables;
}

}  // namespace splitspec::engine
