// CudaBackend: device memory, host-to-device staging of each op's small index arrays, and the
// kernel launchers of this folder. Ops enqueue on one stream and never synchronise except
// where results reach the host (DownloadRows) or memory is freed.
#include "common/engine/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/engine/cuda/add.cuh"
#include "common/engine/cuda/attention.cuh"
#include "common/engine/cuda/cuda_check.h"
#include "common/engine/cuda/embedding.cuh"
#include "common/engine/cuda/matmul.cuh"
#include "common/engine/cuda/rmsnorm.cuh"
#include "common/engine/cuda/rope.cuh"
#include "common/engine/cuda/silu_mul.cuh"

namespace splitspec::engine {
namespace {

// Packs host arrays into one byte buffer, each 16-byte aligned, for a single upload per op.
class HostPack {
 public:
  // Returns the byte offset of the copy within the pack.
  size_t Add(const void* data, size_t bytes) {
    const size_t offset = (bytes_.size() + 15) / 16 * 16;
    bytes_.resize(offset + bytes);
    if (bytes > 0) std::memcpy(bytes_.data() + offset, data, bytes);
    return offset;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// A device buffer that grows on demand. Growing frees the old buffer, which cudaFree orders
// after all work already queued on the device.
struct DeviceBuffer {
  void* data = nullptr;
  size_t capacity = 0;
};

// The kernels take engine::DType values as int (see common.cuh).
int DTypeCode(DType dtype) { return static_cast<int>(dtype); }

cudaDataType_t CudaType(DType dtype) {
  switch (dtype) {
    case DType::kF16: return CUDA_R_16F;
    case DType::kBF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

class CudaBackendImpl final : public CudaBackend {
 public:
  explicit CudaBackendImpl(const CudaBackendOptions& options) : options_(options) {}

  ~CudaBackendImpl() override {
    for (DeviceBuffer* b : {&staging_, &convert_, &scores_}) {
      if (b->data != nullptr) cudaFree(b->data);
    }
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    CUDA_CHECK(cudaSetDevice(options_.device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    return absl::OkStatus();
  }

  std::string_view name() const override { return "cuda"; }
  absl::Status status() const override { return status_; }
  void* stream() const override { return stream_; }
  absl::Status Synchronize() override {
    Record([&]() -> absl::Status {
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      return absl::OkStatus();
    }());
    return status_;
  }

  // ---- memory ---------------------------------------------------------------------------
  absl::StatusOr<Tensor> Allocate(DType dtype, int64_t rows, int64_t cols) override {
    if (rows < 0 || cols < 0) return absl::InvalidArgumentError("negative tensor shape");
    Tensor tensor{nullptr, dtype, rows, cols};
    const size_t bytes = std::max<size_t>(tensor.n_bytes(), 16);
    const cudaError_t error = cudaMalloc(&tensor.data, bytes);
    if (error != cudaSuccess) {
      cudaGetLastError();  // clear the sticky launch error state for later calls
      return absl::ResourceExhaustedError(
          absl::StrCat("out of GPU memory allocating ", bytes, " bytes: ", cudaGetErrorString(error)));
    }
    CUDA_CHECK(cudaMemsetAsync(tensor.data, 0, bytes, stream_));
    return tensor;
  }

  void Free(Tensor& tensor) override {
    if (tensor.data != nullptr) Record(FreeDevice(tensor.data));
    tensor.data = nullptr;
  }

  void Upload(const void* host, Tensor& tensor) override {
    Record([&]() -> absl::Status {
      CUDA_CHECK(cudaMemcpyAsync(tensor.data, host, tensor.n_bytes(), cudaMemcpyHostToDevice, stream_));
      // The caller may free `host` as soon as we return.
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      return absl::OkStatus();
    }());
  }

  void DownloadRows(const Tensor& tensor, int64_t first_row, int64_t n_rows, float* host) override {
    Record([&]() -> absl::Status {
      const size_t bytes = static_cast<size_t>(n_rows * tensor.cols) * sizeof(float);
      CUDA_CHECK(cudaMemcpyAsync(host, tensor.f32() + first_row * tensor.cols, bytes, cudaMemcpyDeviceToHost, stream_));
      CUDA_CHECK(cudaStreamSynchronize(stream_));
      return absl::OkStatus();
    }());
  }

  // ---- ops ------------------------------------------------------------------------------
  void Embed(const Tensor& table, absl::Span<const int32_t> tokens, Tensor& out) override {
    Record([&]() -> absl::Status {
      HostPack pack;
      pack.Add(tokens.data(), tokens.size() * sizeof(int32_t));
      absl::StatusOr<uint8_t*> staged = Stage(pack);
      if (!staged.ok()) return staged.status();
      CUDA_CHECK(cuda::LaunchEmbed(table.data, DTypeCode(table.dtype), reinterpret_cast<const int32_t*>(*staged),
                                   static_cast<int>(tokens.size()), table.cols, out.f32(), stream_));
      return absl::OkStatus();
    }());
  }

  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    Record([&]() -> absl::Status {
      CUDA_CHECK(cuda::LaunchRmsNorm(x.f32(), weight.f32(), eps, x.rows, x.cols, out.f32(), stream_));
      return absl::OkStatus();
    }());
  }

  void MatMul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
              absl::Span<const int32_t> rows) override {
    Record(DoMatMul(x, w, bias, out, rows));
  }

  void Rope(Tensor& x, int n_heads, const RopeTables& tables, absl::Span<const int32_t> positions) override {
    Record([&]() -> absl::Status {
      HostPack pack;
      const size_t positions_at = pack.Add(positions.data(), positions.size() * sizeof(int32_t));
      const size_t freq_at = pack.Add(tables.inv_freq.data(), tables.inv_freq.size() * sizeof(float));
      absl::StatusOr<uint8_t*> staged = Stage(pack);
      if (!staged.ok()) return staged.status();
      CUDA_CHECK(cuda::LaunchRope(x.f32(), x.rows, n_heads, tables.head_dim,
                                  reinterpret_cast<const float*>(*staged + freq_at),
                                  reinterpret_cast<const int32_t*>(*staged + positions_at), stream_));
      return absl::OkStatus();
    }());
  }

  void SiluMul(const Tensor& gate_up, Tensor& out) override {
    Record([&]() -> absl::Status {
      CUDA_CHECK(cuda::LaunchSiluMul(gate_up.f32(), out.rows, out.cols, out.f32(), stream_));
      return absl::OkStatus();
    }());
  }

  void Add(Tensor& acc, const Tensor& x) override {
    Record([&]() -> absl::Status {
      CUDA_CHECK(cuda::LaunchAdd(acc.f32(), x.f32(), acc.n_elements(), stream_));
      return absl::OkStatus();
    }());
  }

  void Attention(const Tensor& q, const Tensor& k, const Tensor& v, int n_heads, const KvLayout& layout,
                 Tensor& k_cache, Tensor& v_cache, absl::Span<const AttentionSequence> sequences,
                 Tensor& out) override {
    Record(DoAttention(q, k, v, n_heads, layout, k_cache, v_cache, sequences, out));
  }

  void CopyKvSlots(Tensor& k_cache, Tensor& v_cache, absl::Span<const int32_t> src,
                   absl::Span<const int32_t> dst) override {
    Record([&]() -> absl::Status {
      HostPack pack;
      const size_t src_at = pack.Add(src.data(), src.size() * sizeof(int32_t));
      const size_t dst_at = pack.Add(dst.data(), dst.size() * sizeof(int32_t));
      absl::StatusOr<uint8_t*> staged = Stage(pack);
      if (!staged.ok()) return staged.status();
      CUDA_CHECK(cuda::LaunchCopyKvSlots(k_cache.f32(), v_cache.f32(), k_cache.cols,
                                         reinterpret_cast<const int32_t*>(*staged + src_at),
                                         reinterpret_cast<const int32_t*>(*staged + dst_at),
                                         static_cast<int>(src.size()), stream_));
      return absl::OkStatus();
    }());
  }

 private:
  void Record(const absl::Status& status) {
    if (!status.ok() && status_.ok()) status_ = status;
  }

  absl::Status FreeDevice(void* data) {
    CUDA_CHECK(cudaFree(data));
    return absl::OkStatus();
  }

  absl::StatusOr<void*> Grow(DeviceBuffer& buffer, size_t bytes) {
    if (buffer.capacity < bytes) {
      if (buffer.data != nullptr) {
        CUDA_CHECK(cudaFree(buffer.data));
        buffer.data = nullptr;
        buffer.capacity = 0;
      }
      const size_t rounded = std::max<size_t>(bytes + bytes / 4, 4096);  // headroom for slowly growing batches
      CUDA_CHECK(cudaMalloc(&buffer.data, rounded));
      buffer.capacity = rounded;
    }
    return buffer.data;
  }

  // Copies an op's packed host arrays to the device staging buffer. The copy is queued on the
  // stream, so it lands after earlier kernels finished reading the previous op's arrays.
  absl::StatusOr<uint8_t*> Stage(const HostPack& pack) {
    const size_t bytes = std::max<size_t>(pack.bytes().size(), 16);
    absl::StatusOr<void*> buffer = Grow(staging_, bytes);
    if (!buffer.ok()) return buffer.status();
    if (!pack.bytes().empty()) {
      CUDA_CHECK(cudaMemcpyAsync(*buffer, pack.bytes().data(), pack.bytes().size(), cudaMemcpyHostToDevice, stream_));
    }
    return static_cast<uint8_t*>(*buffer);
  }

  absl::Status DoMatMul(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out,
                        absl::Span<const int32_t> rows) {
    const int64_t n_tokens = rows.empty() ? x.rows : static_cast<int64_t>(rows.size());
    const int64_t k = w.cols;
    const int64_t n_out = w.rows;
    const float* bias_data = bias != nullptr ? bias->f32() : nullptr;
    const int32_t* rows_device = nullptr;
    if (!rows.empty()) {
      HostPack pack;
      pack.Add(rows.data(), rows.size() * sizeof(int32_t));
      absl::StatusOr<uint8_t*> staged = Stage(pack);
      if (!staged.ok()) return staged.status();
      rows_device = reinterpret_cast<const int32_t*>(*staged);
    }
    if (w.dtype == DType::kQ8_0) {
      // The activations' int8 form goes where cuBLAS's converted activations would.
      absl::StatusOr<void*> scratch = Grow(convert_, cuda::Q8ActivationBytes(n_tokens, k));
      if (!scratch.ok()) return scratch.status();
      CUDA_CHECK(cuda::LaunchMatMulQ8(x.f32(), rows_device, n_tokens, k, w.data, n_out, bias_data, out.f32(), *scratch,
                                      stream_));
      return absl::OkStatus();
    }
    if (!options_.use_cublas) {
      CUDA_CHECK(cuda::LaunchMatMulWarp(x.f32(), rows_device, n_tokens, k, w.data, DTypeCode(w.dtype), n_out,
                                        bias_data, out.f32(), stream_));
      return absl::OkStatus();
    }
    if (n_tokens == 0) return absl::OkStatus();
    // cuBLAS wants both inputs in one dtype: gather/convert the activations to the weights'.
    const void* x_data = x.f32();
    if (w.dtype != DType::kF32 || rows_device != nullptr) {
      absl::StatusOr<void*> converted = Grow(convert_, static_cast<size_t>(n_tokens * k) * DTypeSize(w.dtype));
      if (!converted.ok()) return converted.status();
      CUDA_CHECK(cuda::LaunchGatherConvert(x.f32(), rows_device, n_tokens, k, DTypeCode(w.dtype), *converted, stream_));
      x_data = *converted;
    }
    // Row-major out (T, n_out) is column-major (n_out, T) = W (col-major k x n_out)^T * x.
    const float alpha = 1.0f;
    const float beta = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n_out), static_cast<int>(n_tokens),
                              static_cast<int>(k), &alpha, w.data, CudaType(w.dtype), static_cast<int>(k), x_data,
                              CudaType(w.dtype), static_cast<int>(k), &beta, out.f32(), CUDA_R_32F,
                              static_cast<int>(n_out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (bias_data != nullptr) CUDA_CHECK(cuda::LaunchAddBias(out.f32(), bias_data, n_tokens, n_out, stream_));
    return absl::OkStatus();
  }

  absl::Status DoAttention(const Tensor& q, const Tensor& k, const Tensor& v, int n_heads, const KvLayout& layout,
                           Tensor& k_cache, Tensor& v_cache, absl::Span<const AttentionSequence> sequences,
                           Tensor& out) {
    std::vector<cuda::AttentionSeqDesc> descs;
    std::vector<cuda::AttentionItem> items;
    std::vector<int32_t> tables;
    std::vector<uint8_t> masks;
    int32_t max_visible = 1;
    for (int32_t s = 0; s < static_cast<int32_t>(sequences.size()); ++s) {
      const AttentionSequence& seq = sequences[s];
      const int32_t length = seq.n_context + seq.n_new;
      const int32_t n_blocks = (length + layout.block_size - 1) / layout.block_size;
      cuda::AttentionSeqDesc desc{seq.n_context, seq.n_new, seq.first_row, static_cast<int32_t>(tables.size()), -1,
                                  seq.ancestor_mask != nullptr ? seq.n_tree_context : 0};
      tables.insert(tables.end(), seq.block_table, seq.block_table + n_blocks);
      if (seq.ancestor_mask != nullptr) {
        desc.mask_offset = static_cast<int32_t>(masks.size());
        const size_t mask_width = static_cast<size_t>(seq.n_tree_context) + seq.n_new;
        masks.insert(masks.end(), seq.ancestor_mask, seq.ancestor_mask + static_cast<size_t>(seq.n_new) * mask_width);
      }
      descs.push_back(desc);
      for (int32_t i = 0; i < seq.n_new; ++i) items.push_back({s, i});
      max_visible = std::max(max_visible, length);
    }
    if (items.empty()) return absl::OkStatus();
    HostPack pack;
    const size_t descs_at = pack.Add(descs.data(), descs.size() * sizeof(descs[0]));
    const size_t items_at = pack.Add(items.data(), items.size() * sizeof(items[0]));
    const size_t tables_at = pack.Add(tables.data(), tables.size() * sizeof(int32_t));
    const size_t masks_at = pack.Add(masks.data(), masks.size());
    absl::StatusOr<uint8_t*> staged = Stage(pack);
    if (!staged.ok()) return staged.status();
    const auto* d_descs = reinterpret_cast<const cuda::AttentionSeqDesc*>(*staged + descs_at);
    const auto* d_items = reinterpret_cast<const cuda::AttentionItem*>(*staged + items_at);
    const auto* d_tables = reinterpret_cast<const int32_t*>(*staged + tables_at);
    const uint8_t* d_masks = *staged + masks_at;
    const int n_items = static_cast<int>(items.size());
    absl::StatusOr<void*> scores =
        Grow(scores_, cuda::AttentionScratchBytes(n_items, n_heads, layout.head_dim, max_visible));
    if (!scores.ok()) return scores.status();
    CUDA_CHECK(cuda::LaunchStoreKv(k.f32(), v.f32(), k.cols, d_descs, d_items, n_items, d_tables, layout.block_size,
                                   k_cache.f32(), v_cache.f32(), stream_));
    CUDA_CHECK(cuda::LaunchPagedAttention(q.f32(), n_heads, layout.n_heads_kv, layout.head_dim, k_cache.f32(),
                                          v_cache.f32(), layout.block_size, d_descs, d_items, n_items, d_tables,
                                          d_masks, static_cast<float*>(*scores), max_visible, out.f32(), stream_));
    return absl::OkStatus();
  }

  CudaBackendOptions options_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer staging_;  // each op's index arrays
  DeviceBuffer convert_;  // activations converted for cuBLAS, or quantized for Q8_0 weights
  DeviceBuffer scores_;   // attention scratch: scores, the visible keys' slots, partial sums
  absl::Status status_;
};

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver / no device: clear the error, report none
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CreateCudaBackend(const CudaBackendOptions& options) {
  const int count = CudaDeviceCount();
  if (options.device < 0 || options.device >= count) {
    return absl::UnavailableError(absl::StrCat("CUDA device ", options.device, " requested; ", count, " present"));
  }
  auto backend = std::make_unique<CudaBackendImpl>(options);
  absl::Status init = backend->Init();
  if (!init.ok()) return init;
  return std::unique_ptr<CudaBackend>(std::move(backend));
}

}  // namespace splitspec::engine
