#include "common/engine/cpu/q8_groups.h"

#include <cstring>

#include "common/engine/cpu/simd.h"

namespace splitspec::engine::cpu {

void PackQ8Groups(const uint8_t* row_major, int64_t rows, int64_t cols, uint8_t* grouped) {
  const int64_t n_blocks = cols / kQ8BlockSize;
  const size_t row_bytes = DTypeRowBytes(DType::kQ8_0, cols);
  for (int64_t g = 0; g < Q8GroupCount(rows); ++g) {
    uint8_t* group = grouped + g * Q8GroupBytes(cols);
    auto* scales = reinterpret_cast<uint16_t*>(group);
    uint8_t* values = const_cast<uint8_t*>(Q8GroupValues(group, cols));
    for (int lane = 0; lane < kQ8GroupRows; ++lane) {
      const int64_t row = g * kQ8GroupRows + lane;
      const uint8_t* src = row < rows ? row_major + row * row_bytes : nullptr;
      for (int64_t b = 0; b < n_blocks; ++b) {
        uint16_t scale = 0;
        if (src != nullptr) std::memcpy(&scale, Q8RowScales(src) + 2 * b, sizeof scale);
        scales[b * kQ8GroupRows + lane] = scale;
        for (int i = 0; i < kQ8BlockSize; ++i) {
          const int8_t value = src != nullptr ? Q8RowValues(src, cols)[b * kQ8BlockSize + i] : 0;
          const int64_t quad = b * kQ8BlockQuads + i / kQ8Quad;
          values[quad * kQ8QuadBytes + lane * kQ8Quad + i % kQ8Quad] = static_cast<uint8_t>(value + kQ8ValueOffset);
        }
      }
    }
  }
}

void Q8GroupedRow(const uint8_t* grouped, int64_t cols, int64_t row, float* out) {
  const uint8_t* group = grouped + (row / kQ8GroupRows) * Q8GroupBytes(cols);
  const int64_t lane = row % kQ8GroupRows;
  const uint16_t* scales = Q8GroupScales(group);
  // The row's 4 weights of each quad sit together, one quad of the group (64 bytes) apart.
  const uint8_t* quad = Q8GroupValues(group, cols) + lane * kQ8Quad;
  for (int64_t block = 0; block < cols / kQ8BlockSize; ++block) {
    const float scale = HalfToF32(scales[block * kQ8GroupRows + lane]);
    for (int q = 0; q < kQ8BlockQuads; ++q, quad += kQ8QuadBytes) {
      for (int i = 0; i < kQ8Quad; ++i) *out++ = static_cast<float>(StoredQ8Value(quad[i])) * scale;
    }
  }
}

}  // namespace splitspec::engine::cpu
