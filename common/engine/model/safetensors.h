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

  int64_t n_elements() const;
};

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

// Writes one .safetensors file (header sorted by name, data 8-byte aligned).
class SafetensorsWriter {
 public:
  // `bytes` must hold product(shape) elements of `dtype`, little-endian.
  void Add(std::string name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
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
