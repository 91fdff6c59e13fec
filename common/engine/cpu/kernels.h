// CPU kernel entry points used by cpu_backend.cc; one file per kernel family.
#ifndef SPLITSPEC_COMMON_ENGINE_CPU_KERNELS_H_
#define SPLITSPEC_COMMON_ENGINE_CPU_KERNELS_H_

#include <omp.h>

#include <cstdint>

#include "absl/types/span.h"
#include "common/engine/backend.h"
#include "common/engine/tensor.h"

namespace splitspec::engine::cpu {

// Below this much work (multiply-adds or elements touched) an OpenMP parallel region costs more
// than it saves: a fork/join measured ~1 us with spinning workers and ~7 us with passive ones
// (2 threads; OMP_WAIT_POLICY=passive is what the services run with), while this much work
// takes one core ~20 us. A decode step's norms, RoPE and SiLU stay serial this way, which
// removes about half of a forward's ~130 parallel regions. Threading never changes results:
// each output element has one owner whatever the thread count.
constexpr int64_t kMinParallelWork = int64_t{1} << 18;
inline bool WorthParallel(int64_t work) { return work >= kMinParallelWork; }

// Calls range(first, end) over [0, n): once on this thread unless `parallel`, else once a
// thread of an OpenMP team, each thread a consecutive share (the static schedule's split).
// The branch is taken here rather than by a region's `if` clause: libgomp builds a team of one
// for an `omp parallel if (false)` region, about 0.9 us on a Zen 3 against 0.14 us for the 768
// multiplies inside it, and a decode step entered 61 of them (its norms, RoPE and SiLU), some
// 55 us of a 3-5 ms step. Which thread computes an element never changes its bits.
template <typename RangeFn>
void ForRange(int64_t n, bool parallel, RangeFn&& range) {
  if (!parallel) {
    if (n > 0) range(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t thread = omp_get_thread_num();
    const int64_t first = n * thread / threads;
    const int64_t end = n * (thread + 1) / threads;
    if (end > first) range(first, end);
  }
}

// out[r] = W x[rows[r]] (+ bias); see Backend::MatMul.
void MatMul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
            absl::Span<const int32_t> rows);

// outs[i][t] = W_i x[t] (+ bias_i) for W = [W_0; W_1; ...]; see Backend::MatMulSplit.
void MatMulSplit(const Tensor& x, const Tensor& w, const Tensor* bias, absl::Span<Tensor* const> outs);

// See Backend::Attention.
void Attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_heads, const KvLayout& layout,
               Tensor& k_cache, Tensor& v_cache, absl::Span<const AttentionSequence> sequences,
               Tensor& out);

}  // namespace splitspec::engine::cpu

#endif  // SPLITSPEC_COMMON_ENGINE_CPU_KERNELS_H_
