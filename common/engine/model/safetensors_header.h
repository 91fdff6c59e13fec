// Validation of one safetensors file's header: the 8-byte length, the JSON table of tensors,
// and every tensor's dtype, shape and byte range against the mapped file.
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_SAFETENSORS_HEADER_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_SAFETENSORS_HEADER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/engine/model/safetensors.h"

namespace splitspec::engine {

// Headers above this are refused before parsing (real ones are a few hundred KB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1000 * 1000;

// Parses the safetensors dtype names we store weights in; anything else is an error naming
// `tensor` and `path` (UNIMPLEMENTED for valid safetensors dtypes we do not support,
// INVALID_ARGUMENT for names that are not safetensors dtypes at all).
absl::StatusOr<DType> ParseSafetensorsDType(std::string_view name, std::string_view tensor,
                                            const std::string& path);
std::string_view SafetensorsDTypeName(DType dtype);

// Returns the tensors of the file `data`[0, `size`) with `data` pointers into it, in
// name order. Errors name `path`: DATA_LOSS when the file is shorter than its header says
// (truncated), INVALID_ARGUMENT for a malformed or oversized header, inconsistent sizes or
// overlapping tensors, dtype errors as ParseSafetensorsDType.
absl::StatusOr<std::vector<TensorView>> ParseSafetensorsHeader(const uint8_t* data, size_t size,
                                                               const std::string& path);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_SAFETENSORS_HEADER_H_
