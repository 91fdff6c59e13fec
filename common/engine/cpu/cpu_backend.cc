// The CPU implementation of Backend: host memory, OpenMP threads, the kernels of this folder.
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "absl/strings/str_cat.h"
#include "common/engine/backend.h"
#include "common/engine/cpu/host_memory.h"
#include "common/engine/cpu/kernels.h"
#include "common/engine/cpu/q8_groups.h"
#include "common/engine/cpu/row_groups.h"
#include "common/engine/cpu/simd.h"
#include "common/engine/cpu/vector_exp.h"

namespace splitspec::engine {
namespace {

// Bytes a tensor takes in host memory: Q8_0 matrices are held in whole groups of rows.
size_t HeldBytes(const Tensor& tensor) {
  return tensor.dtype == DType::kQ8_0 ? cpu::Q8GroupedBytes(tensor.rows, tensor.cols) : tensor.n_bytes();
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options)
      : memory_(options.huge_page_chunks ? cpu::HostMemory::kHugePageChunks : cpu::HostMemory::kCAllocator) {
    if (options.n_threads > 0) omp_set_num_threads(options.n_threads);
  }

  std::string_view name() const override { return "cpu"; }

  absl::StatusOr<Tensor> Allocate(DType dtype, int64_t rows, int64_t cols) override {
    if (rows < 0 || cols < 0) return absl::InvalidArgumentError("negative tensor shape");
    if (dtype == DType::kQ8_0 && cols % kQ8BlockSize != 0) {
      return absl::InvalidArgumentError(absl::StrCat("Q8_0 rows hold whole blocks of ", kQ8BlockSize, " weights, not ", cols));
    }
    Tensor tensor{nullptr, dtype, rows, cols};
    const size_t bytes = HeldBytes(tensor);
    tensor.data = cpu::AllocateHostBuffer(bytes, memory_);
    if (tensor.data == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("out of host memory allocating ", bytes, " bytes"));
    }
    return tensor;
  }

  void Free(Tensor& tensor) override {
    cpu::FreeHostBuffer(tensor.data, HeldBytes(tensor), memory_);
    tensor.data = nullptr;
  }

  // Weights come in the file's row layout. Q8_0 matrices are held in groups of rows
  // (q8_groups.h), and so are F16 and BF16 ones where the kernels read them faster that way
  // (row_groups.h).
  void Upload(const void* host, Tensor& tensor) override {
    const auto* bytes = static_cast<const uint8_t*>(host);
    if (tensor.dtype == DType::kQ8_0) {
      cpu::PackQ8Groups(bytes, tensor.rows, tensor.cols, static_cast<uint8_t*>(tensor.data));
      return;
    }
    if (cpu::HoldsInRowGroups(tensor.dtype, tensor.rows, tensor.cols)) {
      cpu::PackRowGroups(bytes, tensor.dtype, tensor.rows, tensor.cols, static_cast<uint8_t*>(tensor.data));
      tensor.layout = TensorLayout::kCpuRowGroups;
      return;
    }
    std::memcpy(tensor.data, host, tensor.n_bytes());
  }

  void DownloadRows(const Tensor& tensor, int64_t first_row, int64_t n_rows, float* host) override {
    std::memcpy(host, tensor.row(first_row), static_cast<size_t>(n_rows * tensor.cols) * sizeof(float));
  }

  void Embed(const Tensor& table, absl::Span<const int32_t> tokens, Tensor& out) override {
    const int64_t dim = table.cols;
    const size_t row_bytes = DTypeRowBytes(table.dtype, dim);
    const auto* data = static_cast<const uint8_t*>(table.data);
    for (size_t t = 0; t < tokens.size(); ++t) {
      float* dst = out.row(static_cast<int64_t>(t));
      if (table.dtype == DType::kQ8_0) {
        cpu::Q8GroupedRow(data, dim, tokens[t], dst);
        continue;
      }
      if (table.layout == TensorLayout::kCpuRowGroups) {
        cpu::RowGroupsRowToF32(data, table.dtype, dim, tokens[t], dst);
        continue;
      }
      const uint8_t* src = data + tokens[t] * row_bytes;
      for (int64_t i = 0; i < dim; ++i) dst[i] = cpu::LoadScalar(src, i, table.dtype);
    }
  }

  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    const int n = static_cast<int>(x.cols);
    cpu::ForRange(x.rows, cpu::WorthParallel(x.n_elements()), [&](int64_t first, int64_t end) {
      for (int64_t t = first; t < end; ++t) {
        const float* in = x.row(t);
        const float sum_squares = cpu::Dot(in, in, n);
        const float inv_rms = 1.0f / std::sqrt(sum_squares / static_cast<float>(n) + eps);
        float* dst = out.row(t);
        const float* w = weight.f32();
        for (int i = 0; i < n; ++i) dst[i] = (in[i] * inv_rms) * w[i];
      }
    });
  }

  void MatMul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
              absl::Span<const int32_t> rows) override {
    cpu::MatMul(x, w, bias, out, rows);
  }

  void MatMulSplit(const Tensor& x, const Tensor& w, const Tensor* bias, absl::Span<Tensor* const> outs) override {
    cpu::MatMulSplit(x, w, bias, outs);
  }

  void Rope(Tensor& x, int n_heads, const RopeTables& tables, absl::Span<const int32_t> positions) override {
    const int head_dim = tables.head_dim;
    const int half = head_dim / 2;
    cpu::ForRange(x.rows, cpu::WorthParallel(x.n_elements()), [&](int64_t first, int64_t end) {
      for (int64_t t = first; t < end; ++t) {
        float* row = x.row(t);
        const float position = static_cast<float>(positions[t]);
        for (int i = 0; i < half; ++i) {
          const float angle = position * tables.inv_freq[i];
          const float c = std::cos(angle);
          const float s = std::sin(angle);
          for (int h = 0; h < n_heads; ++h) {
            float* head = row + h * head_dim;
            const float a = head[i];
            const float b = head[i + half];
            head[i] = a * c - b * s;
            head[i + half] = b * c + a * s;
          }
        }
      }
    });
  }

  void SiluMul(const Tensor& gate_up, Tensor& out) override {
    const int64_t n = out.cols;
    // An exp (cpu/vector_exp.h: a vector of them at a time, not a call each) costs about as
    // much as 4 multiply-adds; rows are the unit of work.
    constexpr int64_t kExpWork = 4;
    const bool parallel = out.rows > 1 && cpu::WorthParallel(out.n_elements() * kExpWork);
    cpu::ForRange(out.rows, parallel, [&](int64_t first, int64_t end) {
      for (int64_t t = first; t < end; ++t) {
        const float* gate = gate_up.row(t);
        const float* up = gate + n;
        float* dst = out.row(t);
        // dst holds exp(-gate) first, then the result: one pass of exps, one of the rest.
        for (int64_t i = 0; i < n; ++i) dst[i] = -gate[i];
        cpu::ExpInPlace(dst, static_cast<size_t>(n), 0.0f);
        for (int64_t i = 0; i < n; ++i) dst[i] = gate[i] / (1.0f + dst[i]) * up[i];
      }
    });
  }

  void Add(Tensor& acc, const Tensor& x) override {
    float* a = acc.f32();
    const float* b = x.f32();
    const int64_t n = acc.n_elements();
    for (int64_t i = 0; i < n; ++i) a[i] += b[i];
  }

  void Attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_heads, const KvLayout& layout,
                 Tensor& k_cache, Tensor& v_cache, absl::Span<const AttentionSequence> sequences,
                 Tensor& out) override {
    cpu::Attention(q, k, v, n_heads, layout, k_cache, v_cache, sequences, out);
  }

  void CopyKvSlots(Tensor& k_cache, Tensor& v_cache, absl::Span<const int32_t> src,
                   absl::Span<const int32_t> dst) override {
    const size_t row_bytes = DTypeRowBytes(k_cache.dtype, k_cache.cols);
    auto* k = static_cast<uint8_t*>(k_cache.data);
    auto* v = static_cast<uint8_t*>(v_cache.data);
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] == dst[i]) continue;
      std::memmove(k + dst[i] * row_bytes, k + src[i] * row_bytes, row_bytes);
      std::memmove(v + dst[i] * row_bytes, v + src[i] * row_bytes, row_bytes);
    }
  }

  // F16 rows: cpu/attention.cc widens them exactly as it reads them.
  bool SupportsKvDType(DType dtype) const override { return dtype == DType::kF32 || dtype == DType::kF16; }

 private:
  const cpu::HostMemory memory_;
};

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace splitspec::engine
