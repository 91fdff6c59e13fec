// What the CPU int8 matmul computes for one output, written out in the order
// common/engine/cpu/matmul_q8.cc states it: the token's activations rounded to int8 per block of
// 32, exact integer block sums against the row's Q8_0 values, each fused-multiply-added into the
// output times the product of the two block scales, blocks in order, then the bias. Every kernel
// (AVX-512 VNNI, AVX2, portable) gives exactly these bits.
#ifndef SPLITSPEC_TESTS_UNIT_ENGINE_Q8_ARITHMETIC_H_
#define SPLITSPEC_TESTS_UNIT_ENGINE_Q8_ARITHMETIC_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/engine/dtype.h"

namespace splitspec::engine {

// `w_row`: one row of `n_in` weights in the file's Q8_0 layout (dtype.h).
inline float Q8KernelArithmetic(const uint8_t* w_row, int64_t n_in, const float* x, float bias) {
  float out = 0;
  for (int64_t b = 0; b < n_in / kQ8BlockSize; ++b) {
    float amax = 0;
    for (int i = 0; i < kQ8BlockSize; ++i) amax = std::max(amax, std::fabs(x[b * kQ8BlockSize + i]));
    const float inverse = amax == 0.0f ? 0.0f : 127.0f / amax;
    int32_t sum = 0;
    for (int i = 0; i < kQ8BlockSize; ++i) {
      const int64_t k = b * kQ8BlockSize + i;
      sum += static_cast<int32_t>(std::nearbyint(x[k] * inverse)) * Q8RowValues(w_row, n_in)[k];
    }
    uint16_t half;
    std::memcpy(&half, Q8RowScales(w_row) + 2 * b, sizeof half);
    out = std::fma(static_cast<float>(sum), F16ToF32(half) * (amax / 127.0f), out);
  }
  return out + bias;
}

}  // namespace splitspec::engine

#endif  // SPLITSPEC_TESTS_UNIT_ENGINE_Q8_ARITHMETIC_H_
