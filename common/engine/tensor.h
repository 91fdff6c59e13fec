// A 2-D tensor living in some backend's memory, row-major unless its backend packed it
// otherwise at upload (`layout`). The engine only ever needs matrices: activations are
// (n_tokens, width), weights are (n_out, n_in).
#ifndef SPLITSPEC_COMMON_ENGINE_TENSOR_H_
#define SPLITSPEC_COMMON_ENGINE_TENSOR_H_

#include <cstddef>
#include <cstdint>

#include "common/engine/dtype.h"

namespace splitspec::engine {

// How a backend holds a tensor's bytes. Everything is row-major as written or uploaded, except
// what a backend's Upload repacks: the CPU backend holds F16 and BF16 weight matrices in
// interleaved groups of rows where that reads faster (cpu/row_groups.h). Only that backend's
// kernels read such a tensor, and offsetting its `data` does not give a tensor of later rows.
// (Its Q8_0 matrices are always in groups of rows, whatever this says: q8_groups.h.)
enum class TensorLayout : uint8_t { kRowMajor, kCpuRowGroups };

struct Tensor {
  void* data = nullptr;  // backend memory (host memory on the CPU backend)
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  TensorLayout layout = TensorLayout::kRowMajor;

  int64_t n_elements() const { return rows * cols; }
  size_t n_bytes() const { return static_cast<size_t>(rows) * DTypeRowBytes(dtype, cols); }
  float* f32() const { return static_cast<float*>(data); }
  // Row `r` of a tensor viewed as f32 (activations only).
  float* row(int64_t r) const { return f32() + r * cols; }
};

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_TENSOR_H_
