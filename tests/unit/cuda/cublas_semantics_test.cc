// cublasGemmEx's semantics as the CUDA backend relies on them: column-major storage, op(A) /
// op(B) transposes, leading dimensions larger than the rows, f16 / bf16 inputs with f32
// output and compute, alpha / beta, and the argument errors. The expectations come from
// logical (row, column) matrices packed into column-major buffers, not from an index formula,
// so the same test holds the CPU stand-in (emulation build) and the real cuBLAS (GPU build)
// to one definition.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace splitspec::engine::testing {
namespace {

using Matrix = std::vector<std::vector<float>>;  // [row][column]

Matrix RandomMatrix(int rows, int cols, uint64_t seed) {
  const std::vector<float> values = RandomValues(static_cast<size_t>(rows) * cols, seed);
  Matrix m(rows, std::vector<float>(cols));
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) m[r][c] = values[static_cast<size_t>(r) * cols + c];
  }
  return m;
}

Matrix Transposed(const Matrix& m) {
  Matrix t(m[0].size(), std::vector<float>(m.size()));
  for (size_t r = 0; r < m.size(); ++r) {
    for (size_t c = 0; c < m[0].size(); ++c) t[c][r] = m[r][c];
  }
  return t;
}

// Column-major storage of `m` with leading dimension ld >= rows, as `dtype` bytes; padding
// holds NaN so that reading it shows up.
std::vector<uint8_t> PackColumnMajor(const Matrix& m, int ld, DType dtype) {
  const int rows = static_cast<int>(m.size()), cols = static_cast<int>(m[0].size());
  const size_t n = static_cast<size_t>(ld) * cols, size = DTypeSize(dtype);
  std::vector<uint8_t> bytes(n * size);
  for (size_t i = 0; i < n; ++i) {
    const int r = static_cast<int>(i % ld), c = static_cast<int>(i / ld);
    const float v = r < rows ? m[r][c] : NAN;
    if (dtype == DType::kF32) {
      std::memcpy(&bytes[i * 4], &v, 4);
    } else {
      const uint16_t h = dtype == DType::kF16 ? F32ToF16(v) : F32ToBF16(v);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  return bytes;
}

// The values a 16-bit input carries.
Matrix Rounded(const Matrix& m, DType dtype) {
  Matrix r = m;
  for (auto& row : r) {
    for (float& v : row) {
      if (dtype == DType::kF16) v = F16ToF32(F32ToF16(v));
      if (dtype == DType::kBF16) v = BF16ToF32(F32ToBF16(v));
    }
  }
  return r;
}

cudaDataType_t CudaTypeOf(DType dtype) {
  return dtype == DType::kF16 ? CUDA_R_16F : dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
}

class CublasSemanticsTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    for (void* p : buffers_) cudaFree(p);
    if (handle_ != nullptr) cublasDestroy(handle_);
    CudaTest::TearDown();
  }
  void* Device(const std::vector<uint8_t>& bytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes.size()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    buffers_.push_back(p);
    return p;
  }
  cublasHandle_t handle_ = nullptr;
  std::vector<void*> buffers_;
};

struct GemmCase {
  cublasOperation_t transa, transb;
  int m, n, k;
  int lda_pad, ldb_pad, ldc_pad;  // leading dimension = stored rows + pad
  DType input;
  float alpha, beta;
};

TEST_F(CublasSemanticsTest, GemmExMatchesTheDefinition) {
  const std::vector<GemmCase> cases = {
      {CUBLAS_OP_N, CUBLAS_OP_N, 5, 3, 7, 0, 0, 0, DType::kF32, 1.0f, 0.0f},
      {CUBLAS_OP_T, CUBLAS_OP_N, 33, 6, 67, 0, 0, 0, DType::kF32, 1.0f, 0.0f},  // the backend's call
      {CUBLAS_OP_T, CUBLAS_OP_N, 33, 6, 64, 0, 0, 0, DType::kF16, 1.0f, 0.0f},
      {CUBLAS_OP_T, CUBLAS_OP_N, 33, 6, 64, 0, 0, 0, DType::kBF16, 1.0f, 0.0f},
      {CUBLAS_OP_N, CUBLAS_OP_T, 4, 9, 5, 3, 2, 1, DType::kF32, 0.5f, 0.0f},
      {CUBLAS_OP_T, CUBLAS_OP_T, 6, 2, 3, 1, 4, 5, DType::kF16, 2.0f, 0.0f},
      {CUBLAS_OP_C, CUBLAS_OP_N, 3, 4, 8, 2, 0, 3, DType::kBF16, 1.0f, 0.0f},  // C = T for real types
      {CUBLAS_OP_N, CUBLAS_OP_N, 7, 5, 4, 1, 1, 2, DType::kF32, 1.5f, -0.5f},  // beta reads C
  };
  for (const GemmCase& c : cases) {
    const std::string what = absl::StrCat("op ", c.transa, c.transb, " m", c.m, " n", c.n, " k", c.k, " ",
                                          std::string(DTypeName(c.input)), " beta ", c.beta);
    // Logical op(A) (m x k) and op(B) (k x n), stored transposed when the op says so.
    const Matrix op_a = RandomMatrix(c.m, c.k, 1), op_b = RandomMatrix(c.k, c.n, 2), c0 = RandomMatrix(c.m, c.n, 3);
    const Matrix stored_a = c.transa == CUBLAS_OP_N ? op_a : Transposed(op_a);
    const Matrix stored_b = c.transb == CUBLAS_OP_N ? op_b : Transposed(op_b);
    const int lda = static_cast<int>(stored_a.size()) + c.lda_pad, ldb = static_cast<int>(stored_b.size()) + c.ldb_pad;
    const int ldc = c.m + c.ldc_pad;
    void* a = Device(PackColumnMajor(stored_a, lda, c.input));
    void* b = Device(PackColumnMajor(stored_b, ldb, c.input));
    std::vector<uint8_t> c_bytes = PackColumnMajor(c0, ldc, DType::kF32);
    if (c.beta == 0.0f) {  // C must not be read: fill it with NaN
      const float nan = NAN;
      for (size_t i = 0; i < c_bytes.size(); i += 4) std::memcpy(&c_bytes[i], &nan, 4);
    }
    void* out = Device(c_bytes);
    ASSERT_EQ(cublasGemmEx(handle_, c.transa, c.transb, c.m, c.n, c.k, &c.alpha, a, CudaTypeOf(c.input), lda, b,
                           CudaTypeOf(c.input), ldb, &c.beta, out, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS)
        << what;
    std::vector<float> got(static_cast<size_t>(ldc) * c.n);
    ASSERT_EQ(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    const Matrix ra = Rounded(op_a, c.input), rb = Rounded(op_b, c.input);
    std::vector<float> expected, actual;
    for (int j = 0; j < c.n; ++j) {
      for (int i = 0; i < c.m; ++i) {
        double sum = 0;
        for (int l = 0; l < c.k; ++l) sum += static_cast<double>(ra[i][l]) * rb[l][j];
        expected.push_back(static_cast<float>(c.alpha * sum + (c.beta != 0.0f ? c.beta * c0[i][j] : 0.0)));
        actual.push_back(got[static_cast<size_t>(j) * ldc + i]);
      }
      // C's padding rows are not part of the output: untouched.
      for (int i = c.m; i < ldc; ++i) EXPECT_TRUE(std::isnan(got[static_cast<size_t>(j) * ldc + i])) << what;
    }
    // f32 accumulation of products of exact inputs: a few ulps of sqrt(k)-sized sums.
    ExpectNear(expected, actual, 1e-5f * c.k, what);
  }
}

TEST_F(CublasSemanticsTest, GemmExRejectsBadArguments) {
  const float one = 1.0f, zero = 0.0f;
  void* buffer = Device(std::vector<uint8_t>(4096));
  const auto gemm = [&](cublasOperation_t ta, int m, int n, int k, int lda, int ldb, int ldc, cudaDataType_t ab,
                        cudaDataType_t ct) {
    return cublasGemmEx(handle_, ta, CUBLAS_OP_N, m, n, k, &one, buffer, ab, lda, buffer, ab, ldb, &zero, buffer, ct,
                        ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  EXPECT_EQ(gemm(CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(CUBLAS_OP_N, -1, 4, 4, 4, 4, 4, CUDA_R_32F, CUDA_R_32F), CUBLAS_STATUS_INVALID_VALUE);
  // lda must cover the stored rows: m for N, k for T.
  EXPECT_EQ(gemm(CUBLAS_OP_N, 8, 2, 4, 4, 4, 8, CUDA_R_32F, CUDA_R_32F), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(gemm(CUBLAS_OP_T, 8, 2, 4, 4, 4, 8, CUDA_R_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(gemm(CUBLAS_OP_N, 4, 4, 8, 4, 4, 4, CUDA_R_32F, CUDA_R_32F), CUBLAS_STATUS_INVALID_VALUE);  // ldb < k
  EXPECT_EQ(gemm(CUBLAS_OP_N, 4, 4, 4, 4, 4, 3, CUDA_R_32F, CUDA_R_32F), CUBLAS_STATUS_INVALID_VALUE);  // ldc < m
  // f32 inputs with a 16-bit output are not in GemmEx's table.
  EXPECT_EQ(gemm(CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_32F, CUDA_R_16F), CUBLAS_STATUS_NOT_SUPPORTED);
}

}  // namespace
}  // namespace splitspec::engine::testing
