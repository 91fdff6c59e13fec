// A 2-D row-major tensor living in some backend's memory. The engine only ever needs
// matrices: activations are (n_tokens, width), weights are (n_out, n_in).
#ifndef SPLITSPEC_COMMON_ENGINE_TENSOR_H_
#define SPLITSPEC_COMMON_ENGINE_TENSOR_H_

#include <cstddef>
#include <cstdint>

#include "common/engine/dtype.h"

namespace splitspec::engine {

struct Tensor {
  void* data = nullptr;  // backend memory (host memory on the CPU backend)
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;

  int64_t n_elements() const { return rows * cols; }
  size_t n_bytes() const { return static_cast<size_t>(rows) * DTypeRowBytes(dtype, cols); }
  float* f32() const { return static_cast<float*>(data); }
  // Row `r` of a tensor viewed as f32 (activations only).
  float* row(int64_t r) const { return f32() + r * cols; }
};

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_TENSOR_H_
