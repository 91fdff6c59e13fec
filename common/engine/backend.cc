// Default implementations of the Backend interface's optional ops.
#include "common/engine/backend.h"

#include <cstdint>

namespace splitspec::engine {

void Backend::MatMulSplit(const Tensor& x, const Tensor& w, const Tensor* bias, absl::Span<Tensor* const> outs) {
  const size_t row_bytes = DTypeRowBytes(w.dtype, w.cols);
  int64_t first_row = 0;
  for (Tensor* out : outs) {
    // Rows of a row-major matrix are contiguous, so a part is a plain sub-tensor (on any device).
    const Tensor part{static_cast<uint8_t*>(w.data) + first_row * row_bytes, w.dtype, out->cols, w.cols};
    if (bias != nullptr) {
      const Tensor part_bias{bias->f32() + first_row, DType::kF32, 1, out->cols};
      MatMul(x, part, &part_bias, *out);
    } else {
      MatMul(x, part, nullptr, *out);
    }
    first_row += out->cols;
  }
}

}  // namespace splitspec::engine
