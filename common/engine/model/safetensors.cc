// SafetensorsArchive over one mapped file or the shards named by model.safetensors.index.json.
#include "common/engine/model/safetensors.h"

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/engine/model/mapped_file.h"
#include "common/engine/model/safetensors_header.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine {
namespace {

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

class MappedArchive final : public SafetensorsArchive {
 public:
  explicit MappedArchive(std::string description) : description_(std::move(description)) {}

  // Maps `path` and adds its tensors; INVALID_ARGUMENT when a name is already present.
  absl::Status AddFile(const std::string& path) {
    absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
    if (!file.ok()) return file.status();
    absl::StatusOr<std::vector<TensorView>> tensors =
        ParseSafetensorsHeader((*file)->data(), (*file)->size(), path);
    if (!tensors.ok()) return tensors.status();
    for (TensorView& view : *tensors) {
      const auto [it, inserted] = tensors_.emplace(view.name, view);
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", view.name, "' is in both ", it->second.file, " and ", path));
      }
    }
    files_.push_back(*std::move(file));
    return absl::OkStatus();
  }

  absl::StatusOr<TensorView> Get(std::string_view name) const override {
    const auto it = tensors_.find(name);
    if (it == tensors_.end()) {
      return absl::NotFoundError(
          absl::StrCat("tensor '", std::string(name), "' not found in ", description_));
    }
    return it->second;
  }

  bool Contains(std::string_view name) const override { return tensors_.count(name) > 0; }

  std::vector<std::string> TensorNames() const override {
    std::vector<std::string> names;
    names.reserve(tensors_.size());
    for (const auto& [name, view] : tensors_) names.push_back(name);
    return names;
  }

 private:
  std::string description_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorView, std::less<>> tensors_;
};

// Reads model.safetensors.index.json: {"weight_map": {"tensor": "shard file name", ...}}.
absl::StatusOr<std::map<std::string, std::string>> ReadWeightMap(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream text;
  text << in.rdbuf();
  const nlohmann::json index =
      nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  const auto weight_map = index.find("weight_map");
  if (weight_map == index.end() || !weight_map->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": missing 'weight_map' object"));
  }
  std::map<std::string, std::string> result;
  for (const auto& [tensor, shard] : weight_map->items()) {
    // Shards live beside the index: a path component could reach outside the model directory.
    if (!shard.is_string() || shard.get<std::string>().empty() ||
        shard.get<std::string>().find('/') != std::string::npos ||
        shard.get<std::string>() == "." || shard.get<std::string>() == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", tensor, "' maps to a bad shard name ", shard.dump()));
    }
    result[tensor] = shard.get<std::string>();
  }
  if (result.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": empty weight_map"));
  return result;
}

absl::StatusOr<std::unique_ptr<SafetensorsArchive>> OpenSharded(const std::string& model_dir) {
  const std::string index_path = absl::StrCat(model_dir, "/", kIndexFile);
  absl::StatusOr<std::map<std::string, std::string>> weight_map = ReadWeightMap(index_path);
  if (!weight_map.ok()) return weight_map.status();
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : *weight_map) shards.insert(shard);
  auto archive = std::make_unique<MappedArchive>(absl::StrCat(model_dir, " (", index_path, ")"));
  for (const std::string& shard : shards) {
    absl::Status status = archive->AddFile(absl::StrCat(model_dir, "/", shard));
    if (!status.ok()) return status;
  }
  for (const auto& [tensor, shard] : *weight_map) {
    absl::StatusOr<TensorView> view = archive->Get(tensor);
    const std::string shard_path = absl::StrCat(model_dir, "/", shard);
    if (!view.ok() || view->file != shard_path) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": maps tensor '", tensor, "' to ",
                                                     shard, ", which does not hold it"));
    }
  }
  return std::unique_ptr<SafetensorsArchive>(std::move(archive));
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

std::vector<uint8_t> TensorBytesAs(const TensorView& view, DType dtype) {
  const int64_t n = view.n_elements();
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * DTypeSize(dtype));
  if (view.dtype == dtype) {
    std::memcpy(bytes.data(), view.data, bytes.size());
    return bytes;
  }
  for (int64_t i = 0; i < n; ++i) {
    float value = 0;
    switch (view.dtype) {
      case DType::kF32: std::memcpy(&value, view.data + 4 * i, 4); break;
      case DType::kF16: {
        uint16_t h;
        std::memcpy(&h, view.data + 2 * i, 2);
        value = F16ToF32(h);
        break;
      }
      case DType::kBF16: {
        uint16_t b;
        std::memcpy(&b, view.data + 2 * i, 2);
        value = BF16ToF32(b);
        break;
      }
      case DType::kQ8_0: break;  // not a file dtype
    }
    switch (dtype) {
      case DType::kF32: std::memcpy(bytes.data() + 4 * i, &value, 4); break;
      case DType::kF16: {
        const uint16_t h = F32ToF16(value);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
        break;
      }
      case DType::kBF16: {
        const uint16_t b = F32ToBF16(value);
        std::memcpy(bytes.data() + 2 * i, &b, 2);
        break;
      }
      case DType::kQ8_0: break;  // made by QuantizeQ8, never converted to element by element
    }
  }
  return bytes;
}

int64_t TensorView::n_elements() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

absl::StatusOr<std::unique_ptr<SafetensorsArchive>> SafetensorsArchive::OpenDirectory(
    const std::string& model_dir) {
  if (FileExists(absl::StrCat(model_dir, "/", kIndexFile))) return OpenSharded(model_dir);
  const std::string single = absl::StrCat(model_dir, "/", kSingleFile);
  if (!FileExists(single)) {
    return absl::NotFoundError(
        absl::StrCat("no ", kSingleFile, " or ", kIndexFile, " in ", model_dir));
  }
  return OpenFile(single);
}

absl::StatusOr<std::unique_ptr<SafetensorsArchive>> SafetensorsArchive::OpenFile(
    const std::string& path) {
  auto archive = std::make_unique<MappedArchive>(path);
  absl::Status status = archive->AddFile(path);
  if (!status.ok()) return status;
  return std::unique_ptr<SafetensorsArchive>(std::move(archive));
}

absl::StatusOr<TensorView> SafetensorsArchive::GetWithShape(
    std::string_view name, const std::vector<int64_t>& shape) const {
  absl::StatusOr<TensorView> view = Get(name);
  if (!view.ok()) return view.status();
  if (view->shape != shape) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", std::string(name), "' in ", view->file, " has shape ",
                     ShapeString(view->shape), ", expected ", ShapeString(shape)));
  }
  return view;
}

}  // namespace splitspec::engine
