#include "common/engine/cpu/row_groups.h"

#include <cstring>

namespace splitspec::engine::cpu {

void PackRowGroups(const uint8_t* row_major, DType dtype, int64_t rows, int64_t cols, uint8_t* grouped) {
  const size_t row_bytes = DTypeRowBytes(dtype, cols);
  const size_t chunk_bytes = RowGroupChunkBytes(dtype);
  for (int64_t row = 0; row < rows; ++row) {
    uint8_t* to = const_cast<uint8_t*>(RowInGroups(grouped, row_bytes, chunk_bytes, row));
    const uint8_t* from = row_major + row * row_bytes;
    for (int64_t c = 0; c < cols / kLanes; ++c) {
      std::memcpy(to + c * kRowGroupRows * chunk_bytes, from + c * chunk_bytes, chunk_bytes);
    }
  }
}

namespace {

template <typename Format>
void RowToF32(const uint8_t* row, int64_t cols, float* out) {
  for (int64_t k = 0; k < cols; ++k) out[k] = InRowGroups<Format>::Scalar(row, k);
}

}  // namespace

void RowGroupsRowToF32(const uint8_t* grouped, DType dtype, int64_t cols, int64_t row, float* out) {
  const uint8_t* from = RowInGroups(grouped, DTypeRowBytes(dtype, cols), RowGroupChunkBytes(dtype), row);
  if (dtype == DType::kF32) return RowToF32<F32Weights>(from, cols, out);
  if (dtype == DType::kF16) return RowToF32<F16Weights>(from, cols, out);
  RowToF32<BF16Weights>(from, cols, out);
}

}  // namespace splitspec::engine::cpu
