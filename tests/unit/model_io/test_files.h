// Helpers for model-file tests: fresh temporary directories and raw file bytes.
#ifndef SPLITSPEC_TESTS_UNIT_MODEL_IO_TEST_FILES_H_
#define SPLITSPEC_TESTS_UNIT_MODEL_IO_TEST_FILES_H_

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/scoped_temp_dir.h"

namespace splitspec::engine::testing {

// A new empty directory inside this test process's temporary directory, which is removed with
// everything in it when the process exits.
inline std::string FreshDir() {
  std::string pattern = splitspec::testing::ProcessTempDir("model_io_") + "/dir_XXXXXX";
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A safetensors file made by hand: little-endian `header_size` (the header's own size unless
// given), the header text, then `data`.
inline std::string RawSafetensors(const std::string& header, const std::string& data,
                                  std::optional<uint64_t> claimed_size = std::nullopt) {
  const uint64_t header_size = claimed_size.value_or(header.size());
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header_size >> (8 * i)) & 0xff);
  return bytes + header + data;
}

}  // namespace splitspec::engine::testing

#endif  // SPLITSPEC_TESTS_UNIT_MODEL_IO_TEST_FILES_H_
