// Fuzz target: a .safetensors file (8-byte header length, JSON tensor table, data). Whatever
// the bytes, parsing returns an error or tensors whose byte ranges lie inside the file, do not
// overlap, and match their dtype and shape.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/engine/model/safetensors_header.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using splitspec::engine::TensorView;
  absl::StatusOr<std::vector<TensorView>> tensors = splitspec::engine::ParseSafetensorsHeader(data, size, "fuzz");
  if (!tensors.ok()) return 0;
  std::vector<std::pair<const uint8_t*, const uint8_t*>> ranges;
  for (const TensorView& t : *tensors) {
    FUZZ_CHECK(t.n_elements() >= 0);
    FUZZ_CHECK(t.n_bytes == static_cast<size_t>(t.n_elements()) * splitspec::engine::DTypeSize(t.dtype));
    if (t.n_bytes == 0) continue;
    FUZZ_CHECK(t.data >= data && t.data + t.n_bytes <= data + size);
    ranges.emplace_back(t.data, t.data + t.n_bytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) FUZZ_CHECK(ranges[i - 1].second <= ranges[i].first);
  return 0;
}
