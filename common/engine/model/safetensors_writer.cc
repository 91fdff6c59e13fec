// SafetensorsWriter: builds the JSON header, pads it to 8 bytes, and streams the tensors.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/engine/model/safetensors.h"
#include "common/engine/model/safetensors_header.h"
#include "nlohmann/json.hpp"

namespace splitspec::engine {
namespace {

absl::Status IoError(const std::string& what, const std::string& path) {
  const int error = errno;
  // A short write can leave errno at 0, whose code would be OK.
  return absl::Status(error != 0 ? absl::ErrnoToStatusCode(error) : absl::StatusCode::kDataLoss,
                      absl::StrCat("cannot ", what, " ", path, ": ",
                                   error != 0 ? std::strerror(error) : "short write"));
}

}  // namespace

void SafetensorsWriter::Add(std::string name, DType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  entries_.push_back(Entry{std::move(name), dtype, std::move(shape), std::move(bytes)});
}

absl::Status SafetensorsWriter::WriteFile(const std::string& path) const {
  // Name order for both the header (nlohmann sorts keys) and the data.
  std::vector<const Entry*> sorted;
  std::set<std::string_view> names;
  for (const Entry& entry : entries_) {
    if (!names.insert(entry.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", entry.name, "' added twice"));
    }
    int64_t n_elements = 1;
    for (int64_t dim : entry.shape) n_elements *= dim;
    if (entry.bytes.size() != static_cast<size_t>(n_elements) * DTypeSize(entry.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", entry.name, "' has ", entry.bytes.size(), " bytes for ",
                       n_elements, " elements of ", std::string(DTypeName(entry.dtype))));
    }
    sorted.push_back(&entry);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const Entry* a, const Entry* b) { return a->name < b->name; });

  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};  // transformers expects this marker
  uint64_t offset = 0;
  for (const Entry* entry : sorted) {
    header[entry->name] = {{"dtype", SafetensorsDTypeName(entry->dtype)},
                           {"shape", entry->shape},
                           {"data_offsets", {offset, offset + entry->bytes.size()}}};
    offset += entry->bytes.size();
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(header_text.size() >> (8 * i));

  const std::string tmp_path = path + ".tmp";
  std::FILE* file = std::fopen(tmp_path.c_str(), "wb");
  if (file == nullptr) return IoError("create", tmp_path);
  bool ok = std::fwrite(length, 1, 8, file) == 8 &&
            std::fwrite(header_text.data(), 1, header_text.size(), file) == header_text.size();
  for (const Entry* entry : sorted) {
    if (!ok) break;
    if (entry->bytes.empty()) continue;  // fwrite's pointer must not be null, even for 0 bytes
    ok = std::fwrite(entry->bytes.data(), 1, entry->bytes.size(), file) == entry->bytes.size();
  }
  if (!ok) {
    const absl::Status error = IoError("write", tmp_path);
    std::fclose(file);
    std::remove(tmp_path.c_str());
    return error;
  }
  if (std::fclose(file) != 0) {
    const absl::Status error = IoError("write", tmp_path);
    std::remove(tmp_path.c_str());
    return error;
  }
  if (std::rename(tmp_path.c_str(), path.c_str()) != 0) return IoError("rename to", path);
  return absl::OkStatus();
}

}  // namespace splitspec::engine
