#include "common/engine/timed_backend.h"

#include <chrono>

namespace splitspec::engine {

namespace {

// Runs `op` and returns its wall time.
template <typename Op>
double SecondsOf(Op&& op) {
  const auto start = std::chrono::steady_clock::now();
  op();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

template <typename Op>
void TimedBackend::Timed(double* seconds, int64_t* calls, Op&& op) {
  if (!timing_) return op();
  *seconds += SecondsOf(op);
  ++*calls;
}

template <typename Op>
void TimedBackend::TimedElementwise(const char* kind, Op&& op) {
  if (!timing_) return op();
  const double seconds = SecondsOf(op);
  times_.elementwise_seconds += seconds;
  ++times_.elementwise_calls;
  OpTimes::Kind& by_kind = times_.elementwise_by_kind[kind];
  by_kind.seconds += seconds;
  ++by_kind.calls;
}

template <typename Op>
void TimedBackend::TimedMatMul(const Tensor& w, Op&& op) {
  if (!timing_) return op();
  const double seconds = SecondsOf(op);
  const int64_t bytes = static_cast<int64_t>(w.n_bytes());
  times_.matmul_seconds += seconds;
  ++times_.matmul_calls;
  times_.matmul_weight_bytes += bytes;
  MatMulShapeTimes& shape = times_.matmul_by_shape[MatMulShape{w.rows, w.cols, w.dtype}];
  shape.seconds += seconds;
  ++shape.calls;
  shape.weight_bytes += bytes;
}

void TimedBackend::DownloadRows(const Tensor& tensor, int64_t first_row, int64_t n_rows, float* host) {
  TimedElementwise("DownloadRows", [&] { inner_.DownloadRows(tensor, first_row, n_rows, host); });
}

void TimedBackend::Embed(const Tensor& table, absl::Span<const int32_t> tokens, Tensor& out) {
  TimedElementwise("Embed", [&] { inner_.Embed(table, tokens, out); });
}

void TimedBackend::RmsNorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  TimedElementwise("RmsNorm", [&] { inner_.RmsNorm(x, weight, eps, out); });
}

void TimedBackend::MatMul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
                          absl::Span<const int32_t> rows) {
  TimedMatMul(w, [&] { inner_.MatMul(x, w, bias, out, rows); });
}

void TimedBackend::MatMulSplit(const Tensor& x, const Tensor& w, const Tensor* bias, absl::Span<Tensor* const> outs) {
  TimedMatMul(w, [&] { inner_.MatMulSplit(x, w, bias, outs); });
}

void TimedBackend::Rope(Tensor& x, int n_heads, const RopeTables& tables, absl::Span<const int32_t> positions) {
  TimedElementwise("Rope", [&] { inner_.Rope(x, n_heads, tables, positions); });
}

void TimedBackend::SiluMul(const Tensor& gate_up, Tensor& out) {
  TimedElementwise("SiluMul", [&] { inner_.SiluMul(gate_up, out); });
}

void TimedBackend::Add(Tensor& acc, const Tensor& x) {
  TimedElementwise("Add", [&] { inner_.Add(acc, x); });
}

void TimedBackend::Attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_heads, const KvLayout& layout,
                             Tensor& k_cache, Tensor& v_cache, absl::Span<const AttentionSequence> sequences,
                             Tensor& out) {
  Timed(&times_.attention_seconds, &times_.attention_calls,
        [&] { inner_.Attention(q, k, v, n_heads, layout, k_cache, v_cache, sequences, out); });
}

}  // namespace splitspec::engine
