#include "common/engine/model/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/engine/dtype.h"
#include "common/engine/model/safetensors.h"

namespace splitspec::engine {
namespace {

constexpr float kMaxHalf = 65504.0f;

// One block of kQ8BlockSize weights: its half scale into *scale, its values into q.
void QuantizeBlock(const float* w, uint8_t* scale, int8_t* q) {
  float amax = 0;
  for (int i = 0; i < kQ8BlockSize; ++i) amax = std::max(amax, std::fabs(w[i]));
  const uint16_t half = F32ToF16(amax / 127.0f);
  const float d = F16ToF32(half);
  std::memcpy(scale, &half, sizeof half);
  for (int i = 0; i < kQ8BlockSize; ++i) {
    // d == 0: every weight of the block is 0, or too small for a half scale to represent.
    const float v = d == 0.0f ? 0.0f : std::nearbyint(w[i] / d);
    q[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
  }
}

std::vector<float> ToF32(const TensorView& view) {
  std::vector<float> values(static_cast<size_t>(view.n_elements()));
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t h;
    switch (view.dtype) {
      case DType::kF32: std::memcpy(&values[i], view.data + 4 * i, 4); break;
      case DType::kF16: std::memcpy(&h, view.data + 2 * i, 2); values[i] = F16ToF32(h); break;
      case DType::kBF16: std::memcpy(&h, view.data + 2 * i, 2); values[i] = BF16ToF32(h); break;
      case DType::kQ8_0: break;  // not a file dtype
    }
  }
  return values;
}

// A matrix's values as the int8 load leaves them (unchanged when its rows are not whole blocks).
absl::Status RoundTrip(const TensorView& view, std::vector<float>& values) {
  if (view.shape.size() != 2 || view.shape[1] % kQ8BlockSize != 0) return absl::OkStatus();
  const int64_t rows = view.shape[0], cols = view.shape[1];
  absl::StatusOr<std::vector<uint8_t>> q8 = QuantizeQ8(values, rows, cols);
  if (!q8.ok()) return absl::InvalidArgumentError(absl::StrCat(view.name, ": ", q8.status().message()));
  const size_t row_bytes = DTypeRowBytes(DType::kQ8_0, cols);
  for (int64_t r = 0; r < rows; ++r) DequantizeQ8Row(q8->data() + r * row_bytes, cols, values.data() + r * cols);
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteInt8RoundTripModel(const std::string& model_dir, const std::string& out_dir) {
  namespace fs = std::filesystem;
  absl::StatusOr<std::unique_ptr<SafetensorsArchive>> archive = SafetensorsArchive::OpenDirectory(model_dir);
  if (!archive.ok()) return archive.status();
  SafetensorsWriter writer;
  for (const std::string& name : (*archive)->TensorNames()) {
    absl::StatusOr<TensorView> view = (*archive)->Get(name);
    if (!view.ok()) return view.status();
    std::vector<float> values = ToF32(*view);
    if (absl::Status s = RoundTrip(*view, values); !s.ok()) return s;
    std::vector<uint8_t> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    writer.Add(name, DType::kF32, view->shape, std::move(bytes));
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", out_dir, ": ", ec.message()));
  for (const fs::directory_entry& entry : fs::directory_iterator(model_dir, ec)) {
    const std::string file = entry.path().filename().string();
    const bool weights = file.find(".safetensors") != std::string::npos;  // shards and their index too
    if (!entry.is_regular_file() || weights) continue;
    fs::copy_file(entry.path(), fs::path(out_dir) / file, fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot copy ", entry.path().string(), ": ", ec.message()));
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", model_dir, ": ", ec.message()));
  return writer.WriteFile((fs::path(out_dir) / "model.safetensors").string());
}

absl::StatusOr<std::vector<uint8_t>> QuantizeQ8(absl::Span<const float> values, int64_t rows, int64_t cols) {
  if (rows < 0 || cols <= 0 || cols % kQ8BlockSize != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("int8 quantization needs rows of a multiple of ", kQ8BlockSize, " weights, got ", cols));
  }
  if (static_cast<int64_t>(values.size()) != rows * cols) {
    return absl::InvalidArgumentError(absl::StrCat("int8 quantization: ", values.size(), " values for a ", rows,
                                                   " x ", cols, " matrix"));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]) || std::fabs(values[i]) > 127.0f * kMaxHalf) {
      return absl::InvalidArgumentError(absl::StrCat("int8 quantization: weight ", i, " (row ", i / cols,
                                                     ") is ", values[i], ", not a finite value in range"));
    }
  }
  const size_t row_bytes = DTypeRowBytes(DType::kQ8_0, cols);
  std::vector<uint8_t> out(static_cast<size_t>(rows) * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = out.data() + r * row_bytes;
    int8_t* q = const_cast<int8_t*>(Q8RowValues(row, cols));
    for (int64_t b = 0; b < cols / kQ8BlockSize; ++b) {
      QuantizeBlock(values.data() + r * cols + b * kQ8BlockSize, row + 2 * b, q + b * kQ8BlockSize);
    }
  }
  return out;
}

void DequantizeQ8Row(const uint8_t* row, int64_t cols, float* out) {
  const int8_t* q = Q8RowValues(row, cols);
  for (int64_t b = 0; b < cols / kQ8BlockSize; ++b) {
    uint16_t half;
    std::memcpy(&half, Q8RowScales(row) + 2 * b, sizeof half);
    const float d = F16ToF32(half);
    for (int i = 0; i < kQ8BlockSize; ++i) out[b * kQ8BlockSize + i] = static_cast<float>(q[b * kQ8BlockSize + i]) * d;
  }
}

}  // namespace splitspec::engine
