// A read-only memory mapping of a whole file, unmapped on destruction.
#ifndef SPLITSPEC_COMMON_ENGINE_MODEL_MAPPED_FILE_H_
#define SPLITSPEC_COMMON_ENGINE_MODEL_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace splitspec::engine {

// Immutable after Open; safe to read from any number of threads.
class MappedFile {
 public:
  // NOT_FOUND when the file does not exist; other open/map failures carry the errno's code.
  // An empty file maps to size() == 0 and data() == nullptr.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_MODEL_MAPPED_FILE_H_
