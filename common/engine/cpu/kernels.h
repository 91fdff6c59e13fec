// CPU kernel entry points used by cpu_backend.cc; one file per kernel family.
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_KERNELS_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_KERNELS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "common/engine/backend.h"
#include "common/engine/tensor.h"

namespace splitspec::engine::cpu {

// out[r] = W x[rows[r]] (+ bias); see Backend::MatMul.
void MatMul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
            absl::Span<const int32_t> rows);

// See Backend::Attention.
void Attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_heads, const KvLayout& layout,
               Tensor& k_cache, Tensor& v_cache, absl::Span<const AttentionSequence> sequences,
               Tensor& out);

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_KERNELS_H_
