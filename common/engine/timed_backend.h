// A Backend that forwards every call to another and, while timing is on, adds each op's wall
// time to its kind: where a forward's time goes (bench-engine's step breakdown).
//
// The time is taken around each call on the calling thread, so it is the op's whole cost only
// where the backend finishes an op before returning: the CPU backend does (its OpenMP regions
// join before the call returns); a CUDA backend's launches return early and would be timed as
// launches.
#ifndef SPLITSPEC_COMMON_ENGINE_TIMED_BACKEND_H_
#define SPLITSPEC_COMMON_ENGINE_TIMED_BACKEND_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "common/engine/backend.h"

namespace splitspec::engine {

// A weight matrix as the matmuls see it: a projection of a layer (all layers share it) or the
// output head.
struct MatMulShape {
  int64_t rows = 0;
  int64_t cols = 0;
  DType dtype = DType::kF32;

  bool operator<(const MatMulShape& o) const {
    return std::tie(rows, cols, dtype) < std::tie(o.rows, o.cols, o.dtype);
  }
};

// The matmuls with weights of one shape.
struct MatMulShapeTimes {
  double seconds = 0;
  int64_t calls = 0;
  int64_t weight_bytes = 0;  // each call's weights once
};

struct OpTimes {
  double matmul_seconds = 0;   // MatMul and MatMulSplit
  int64_t matmul_weight_bytes = 0;  // the weights those calls read (each weight once a call)
  int64_t matmul_calls = 0;
  // The same matmuls by weight shape: whether small projections read their weights as fast as
  // large ones (a call's fixed costs, a stream's ramp) or one shape lags.
  std::map<MatMulShape, MatMulShapeTimes> matmul_by_shape;
  double attention_seconds = 0;  // Attention: the new K/V rows stored, scores, softmax, sum of V
  int64_t attention_calls = 0;
  // Embed, RmsNorm, Rope, SiluMul, Add and the logits' DownloadRows.
  double elementwise_seconds = 0;
  int64_t elementwise_calls = 0;
  // The same ops by kind ("RmsNorm", "Rope", ...): which of the many small calls a step makes
  // costs more than its arithmetic.
  struct Kind {
    double seconds = 0;
    int64_t calls = 0;
  };
  std::map<std::string, Kind> elementwise_by_kind;

  double total_seconds() const { return matmul_seconds + attention_seconds + elementwise_seconds; }
};

class TimedBackend final : public Backend {
 public:
  // `inner` must outlive this backend; timing starts off.
  explicit TimedBackend(Backend& inner) : inner_(inner) {}

  // While on, every op adds its time to times(); off, calls only forward.
  void set_timing(bool on) { timing_ = on; }
  const OpTimes& times() const { return times_; }
  void ResetTimes() { times_ = OpTimes{}; }

  std::string_view name() const override { return inner_.name(); }
  absl::StatusOr<Tensor> Allocate(DType dtype, int64_t rows, int64_t cols) override {
    return inner_.Allocate(dtype, rows, cols);
  }
  void Free(Tensor& tensor) override { inner_.Free(tensor); }
  void Upload(const void* host, Tensor& tensor) override { inner_.Upload(host, tensor); }
  void DownloadRows(const Tensor& tensor, int64_t first_row, int64_t n_rows, float* host) override;
  void Embed(const Tensor& table, absl::Span<const int32_t> tokens, Tensor& out) override;
  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override;
  void MatMul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
              absl::Span<const int32_t> rows = {}) override;
  void MatMulSplit(const Tensor& x, const Tensor& w, const Tensor* bias, absl::Span<Tensor* const> outs) override;
  void Rope(Tensor& x, int n_heads, const RopeTables& tables, absl::Span<const int32_t> positions) override;
  void SiluMul(const Tensor& gate_up, Tensor& out) override;
  void Add(Tensor& acc, const Tensor& x) override;
  void Attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_heads, const KvLayout& layout,
                 Tensor& k_cache, Tensor& v_cache, absl::Span<const AttentionSequence> sequences,
                 Tensor& out) override;
  void CopyKvSlots(Tensor& k_cache, Tensor& v_cache, absl::Span<const int32_t> src,
                   absl::Span<const int32_t> dst) override {
    inner_.CopyKvSlots(k_cache, v_cache, src, dst);
  }
  bool SupportsKvDType(DType dtype) const override { return inner_.SupportsKvDType(dtype); }

 private:
  // Runs `op`, then (timing on) adds its wall time to *seconds and one to *calls.
  template <typename Op>
  void Timed(double* seconds, int64_t* calls, Op&& op);
  // Timed as a small op, and (timing on) under `kind` too.
  template <typename Op>
  void TimedElementwise(const char* kind, Op&& op);
  // Timed as a matmul, and (timing on) w's bytes added to the weights read, in all and under
  // w's shape.
  template <typename Op>
  void TimedMatMul(const Tensor& w, Op&& op);

  Backend& inner_;
  bool timing_ = false;
  OpTimes times_;
};

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_TIMED_BACKEND_H_
