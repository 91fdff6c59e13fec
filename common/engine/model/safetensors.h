// Read-only, memory-mapped access to Hugging Face safetensors files: a single
// model.safetensors or shards listed by model.safetensors.index.json.
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_SAFETENSORS_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_SAFETENSORS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/dtype.h"

namespace splitspec::engine {

// A tensor inside a mapped file. `data` stays valid while the archive lives.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t n_bytes = 0;
  std::string file;  // the .safetensors file holding it, for error messages

  int64_t n_elements() const;
};

// The tensor's values as host bytes of the file dtype `dtype` (F32, F16 or BF16): its own bytes
// when it already is one, else each value through F32, rounded to nearest even.
std::vector<uint8_t> TensorBytesAs(const TensorView& view, DType dtype);

// Status codes: NOT_FOUND for a missing file or tensor; DATA_LOSS for a truncated file;
// INVALID_ARGUMENT for a malformed or oversized header, a bad index, inconsistent offsets or
// shapes; UNIMPLEMENTED for safetensors dtypes other than F32/F16/BF16. Messages name the file.
// Immutable after opening: safe to use from any number of threads.
class SafetensorsArchive {
 public:
  // Opens `model_dir`/model.safetensors, or the shards named by
  // `model_dir`/model.safetensors.index.json. Validates every header fully (JSON well formed,
  // header size within the file and below 100 MB, known dtypes, offsets inside the data area and
  // consistent with shape x dtype size) so that later reads cannot go out of bounds.
  static absl::StatusOr<std::unique_ptr<SafetensorsArchive>> OpenDirectory(const std::string& model_dir);
  // Opens one .safetensors file.
  static absl::StatusOr<std::unique_ptr<SafetensorsArchive>> OpenFile(const std::string& path);

  virtual ~SafetensorsArchive() = default;

  // NOT_FOUND naming the tensor when absent.
  virtual absl::StatusOr<TensorView> Get(std::string_view name) const = 0;
  // As Get, and INVALID_ARGUMENT naming tensor, expected and actual shape on mismatch.
  absl::StatusOr<TensorView> GetWithShape(std::string_view name, const std::vector<int64_t>& shape) const;
  virtual bool Contains(std::string_view name) const = 0;
  virtual std::vector<std::string> TensorNames() const = 0;
};

// Writes one .safetensors file: header sorted by name and padded with spaces so the data area
// starts 8-byte aligned; tensor data back to back in name order (no holes, as the format's
// reference reader requires). Not thread-safe.
class SafetensorsWriter {
 public:
  // `bytes` must hold product(shape) elements of `dtype`, little-endian.
  void Add(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
  // INVALID_ARGUMENT for duplicate names or a byte count that does not match the shape;
  // I/O errors name `path`. Writes `path`.tmp and renames it, so readers never see half a file.
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
};

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_SAFETENSORS_H_
