// Logits post-processing on the GPU: greedy argmax and temperature softmax per row, so a
// verifier can download token ids (or probabilities for top-k / top-p sampling, which the host
// Sampler applies) instead of whole logit rows.
#ifndef SPLITSPEC_COMMON_ENGINE_CUDA_SAMPLING_CUH_
#define SPLITSPEC_COMMON_ENGINE_CUDA_SAMPLING_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace splitspec::engine::cuda {

// out[r] = index of the largest logit of row r; the lowest index wins ties (as the CPU
// Sampler's Argmax), and NaN never wins.
cudaError_t LaunchArgmax(const float* logits, int64_t n_rows, int64_t vocab, int32_t* out, cudaStream_t stream);

// probs[r] = softmax(logits[r] / temperature); temperature > 0.
cudaError_t LaunchSoftmax(const float* logits, int64_t n_rows, int64_t vocab, float temperature, float* probs,
                          cudaStream_t stream);

}  // namespace splitspec::engine::cuda

#endif  // SPLITSPEC_COMMON_ENGINE_CUDA_SAMPLING_CUH_
