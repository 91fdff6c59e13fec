// Safetensors header validation. Layout: u64 little-endian N, N bytes of JSON
// {"name": {"dtype": "F16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data area; offsets are relative to the data area's start.
//
// Everything a later read depends on is checked here (sizes, ranges, overflow), so that a
// TensorView handed out can be read in full without further checks.
#include "common/engine/model/safetensors_header.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine {
namespace {

using Json = nlohmann::json;

std::string TensorContext(std::string_view tensor, const std::string& path) {
  return absl::StrCat("tensor '", std::string(tensor), "' in ", path);
}

// Reads a non-negative integer (JSON may hold it signed or unsigned).
bool NonNegative(const Json& value, uint64_t* out) {
  if (value.is_number_unsigned()) {
    *out = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(value.get<int64_t>());
    return true;
  }
  return false;
}

// Validates one header entry against a data area of `data_size` bytes.
absl::StatusOr<TensorView> ParseEntry(const std::string& name, const Json& entry,
                                      const uint8_t* data_area, uint64_t data_size,
                                      const std::string& path) {
  const std::string where = TensorContext(name, path);
  if (!entry.is_object()) return absl::InvalidArgumentError(where + ": entry is not an object");
  const auto dtype_it = entry.find("dtype");
  const auto shape_it = entry.find("shape");
  const auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return absl::InvalidArgumentError(where + ": missing or non-string 'dtype'");
  }
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return absl::InvalidArgumentError(where + ": missing or non-array 'shape'");
  }
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
    return absl::InvalidArgumentError(where + ": 'data_offsets' must be [begin, end]");
  }
  TensorView view;
  view.name = name;
  view.file = path;
  absl::StatusOr<DType> dtype = ParseSafetensorsDType(dtype_it->get<std::string>(), name, path);
  if (!dtype.ok()) return dtype.status();
  view.dtype = *dtype;

  // Bound the element count by what the data area can hold, so the product cannot overflow.
  const uint64_t max_elements = data_size / DTypeSize(view.dtype);
  uint64_t n_elements = 1;
  for (const Json& dim_json : *shape_it) {
    uint64_t dim = 0;
    if (!NonNegative(dim_json, &dim) ||
        dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": bad dimension ", dim_json.dump()));
    }
    view.shape.push_back(static_cast<int64_t>(dim));
    if (dim != 0 && n_elements > max_elements / dim) {
      n_elements = max_elements + 1;  // saturate: reported below as larger than the file
    } else {
      n_elements *= dim;
    }
  }
  uint64_t begin = 0;
  uint64_t end = 0;
  if (!NonNegative((*offsets_it)[0], &begin) || !NonNegative((*offsets_it)[1], &end) ||
      begin > end) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": bad data_offsets ", offsets_it->dump()));
  }
  if (end > data_size) {
    return absl::DataLossError(absl::StrCat(where, ": data_offsets ", offsets_it->dump(),
                                            " extend past the data area of ", data_size,
                                            " bytes (file truncated?)"));
  }
  if (n_elements > max_elements || n_elements * DTypeSize(view.dtype) != end - begin) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": data_offsets ", offsets_it->dump(), " span ", end - begin,
                     " bytes but shape [", absl::StrJoin(view.shape, ", "), "] of ",
                     std::string(SafetensorsDTypeName(view.dtype)), " needs ",
                     n_elements > max_elements ? std::string("more than the file holds")
                                               : absl::StrCat(n_elements * DTypeSize(view.dtype))));
  }
  view.data = data_area + begin;
  view.n_bytes = static_cast<size_t>(end - begin);
  return view;
}

// Tensors must not share bytes: a writer bug or a crafted file, never a valid model.
absl::Status CheckNoOverlap(const std::vector<TensorView>& tensors, const std::string& path) {
  std::vector<const TensorView*> sorted;
  for (const TensorView& t : tensors) {
    if (t.n_bytes > 0) sorted.push_back(&t);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorView* a, const TensorView* b) { return a->data < b->data; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->data < sorted[i - 1]->data + sorted[i - 1]->n_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensors '", sorted[i - 1]->name,
                                                     "' and '", sorted[i]->name,
                                                     "' overlap in the data area"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DType> ParseSafetensorsDType(std::string_view name, std::string_view tensor,
                                            const std::string& path) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  static constexpr std::string_view kOtherSafetensorsDTypes[] = {
      "F64", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL", "F8_E4M3", "F8_E5M2"};
  const std::string message =
      absl::StrCat(TensorContext(tensor, path), ": dtype '", std::string(name),
                   "' is not supported (F32, F16, BF16)");
  for (std::string_view other : kOtherSafetensorsDTypes) {
    if (name == other) return absl::UnimplementedError(message);
  }
  return absl::InvalidArgumentError(message + "; it is not a safetensors dtype");
}

std::string_view SafetensorsDTypeName(DType dtype) { return DTypeName(dtype); }

absl::StatusOr<std::vector<TensorView>> ParseSafetensorsHeader(const uint8_t* data, size_t size,
                                                               const std::string& path) {
  if (size < 8) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: ", size,
                                            " bytes, too short for the 8-byte header length"));
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | data[i];
  if (header_size > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header length ", header_size,
                                                   " exceeds the limit of ",
                                                   kMaxSafetensorsHeaderBytes, " bytes"));
  }
  if (header_size > size - 8) {
    return absl::DataLossError(absl::StrCat(path, ": truncated: header length ", header_size,
                                            " but only ", size - 8, " bytes follow"));
  }
  const char* header_begin = reinterpret_cast<const char*>(data + 8);
  const Json header = Json::parse(header_begin, header_begin + header_size, nullptr,
                                  /*allow_exceptions=*/false);
  if (header.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header is not valid JSON"));
  }
  if (!header.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header is not a JSON object"));
  }
  const uint8_t* data_area = data + 8 + header_size;
  const uint64_t data_size = size - 8 - header_size;
  std::vector<TensorView> tensors;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;  // free-form string map; nothing we need
    absl::StatusOr<TensorView> view = ParseEntry(name, entry, data_area, data_size, path);
    if (!view.ok()) return view.status();
    tensors.push_back(*std::move(view));
  }
  absl::Status overlap = CheckNoOverlap(tensors, path);
  if (!overlap.ok()) return overlap;
  return tensors;
}

}  // namespace splitspec::engine
