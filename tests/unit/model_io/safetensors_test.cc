// SafetensorsWriter -> SafetensorsArchive round trips, and every way a single file can be bad:
// each case checks the status code and that the message names the file and the fault.
#include "common/engine/model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/unit/model_io/test_files.h"

namespace splitspec::engine {
namespace {

using testing::FreshDir;
using testing::RawSafetensors;
using testing::ReadBytes;
using testing::WriteBytes;

std::vector<uint8_t> Bytes(size_t n, uint8_t first) {
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(first + 7 * i);
  return bytes;
}

bool Contains(const absl::Status& status, const std::string& text) {
  return status.message().find(text) != std::string_view::npos;
}

TEST(SafetensorsTest, WriterRoundTripsAllDtypes) {
  const std::string path = FreshDir() + "/model.safetensors";
  SafetensorsWriter writer;
  writer.Add("b.f16", DType::kF16, {3, 5}, Bytes(30, 1));  // 30 bytes: next tensor unaligned
  writer.Add("a.f32", DType::kF32, {2, 3}, Bytes(24, 2));
  writer.Add("c.bf16", DType::kBF16, {4}, Bytes(8, 3));
  writer.Add("d.scalar", DType::kF32, {}, Bytes(4, 4));
  writer.Add("e.empty", DType::kF32, {0, 16}, {});
  ASSERT_TRUE(writer.WriteFile(path).ok());

  absl::StatusOr<std::unique_ptr<SafetensorsArchive>> archive = SafetensorsArchive::OpenFile(path);
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_EQ((*archive)->TensorNames(),
            (std::vector<std::string>{"a.f32", "b.f16", "c.bf16", "d.scalar", "e.empty"}));
  struct Expect {
    const char* name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  for (const Expect& e : std::vector<Expect>{{"a.f32", DType::kF32, {2, 3}, Bytes(24, 2)},
                                             {"b.f16", DType::kF16, {3, 5}, Bytes(30, 1)},
                                             {"c.bf16", DType::kBF16, {4}, Bytes(8, 3)},
                                             {"d.scalar", DType::kF32, {}, Bytes(4, 4)},
                                             {"e.empty", DType::kF32, {0, 16}, {}}}) {
    absl::StatusOr<TensorView> view = (*archive)->GetWithShape(e.name, e.shape);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->name, e.name);
    EXPECT_EQ(view->dtype, e.dtype);
    EXPECT_EQ(view->n_elements(), static_cast<int64_t>(e.bytes.size() / DTypeSize(e.dtype)));
    ASSERT_EQ(view->n_bytes, e.bytes.size()) << e.name;
    EXPECT_EQ(std::vector<uint8_t>(view->data, view->data + view->n_bytes), e.bytes) << e.name;
    EXPECT_EQ(view->file, path);
  }
  EXPECT_TRUE((*archive)->Contains("c.bf16"));
  EXPECT_FALSE((*archive)->Contains("c"));

  // The data area starts 8-byte aligned: the header length is a multiple of 8.
  const std::string raw = ReadBytes(path);
  uint64_t header_size = 0;
  std::memcpy(&header_size, raw.data(), 8);
  EXPECT_EQ(header_size % 8, 0u);
  EXPECT_NE(raw.find("\"__metadata__\""), std::string::npos);
}

TEST(SafetensorsTest, OpenDirectoryFindsModelSafetensors) {
  const std::string dir = FreshDir();
  SafetensorsWriter writer;
  writer.Add("w", DType::kF32, {2}, Bytes(8, 9));
  ASSERT_TRUE(writer.WriteFile(dir + "/model.safetensors").ok());
  absl::StatusOr<std::unique_ptr<SafetensorsArchive>> archive =
      SafetensorsArchive::OpenDirectory(dir);
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_TRUE((*archive)->Contains("w"));
}

TEST(SafetensorsTest, WriterRejectsDuplicatesAndWrongByteCounts) {
  const std::string dir = FreshDir();
  SafetensorsWriter duplicate;
  duplicate.Add("w", DType::kF32, {1}, Bytes(4, 0));
  duplicate.Add("w", DType::kF32, {1}, Bytes(4, 0));
  absl::Status status = duplicate.WriteFile(dir + "/dup.safetensors");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "'w'")) << status;

  SafetensorsWriter short_bytes;
  short_bytes.Add("w", DType::kF16, {2, 2}, Bytes(6, 0));  // needs 8
  status = short_bytes.WriteFile(dir + "/short.safetensors");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status, "'w'")) << status;

  SafetensorsWriter no_dir;
  no_dir.Add("w", DType::kF32, {1}, Bytes(4, 0));
  status = no_dir.WriteFile(dir + "/missing/sub/x.safetensors");
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(Contains(status, dir + "/missing/sub/x.safetensors")) << status;
}

TEST(SafetensorsTest, MissingTensorIsNotFoundNamingTensorAndFile) {
  const std::string path = FreshDir() + "/m.safetensors";
  SafetensorsWriter writer;
  writer.Add("present", DType::kF32, {2}, Bytes(8, 0));
  ASSERT_TRUE(writer.WriteFile(path).ok());
  auto archive = SafetensorsArchive::OpenFile(path);
  ASSERT_TRUE(archive.ok()) << archive.status();
  for (const absl::Status& status :
       {(*archive)->Get("absent").status(), (*archive)->GetWithShape("absent", {2}).status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
    EXPECT_TRUE(Contains(status, "'absent'")) << status;
    EXPECT_TRUE(Contains(status, path)) << status;
  }
}

TEST(SafetensorsTest, WrongShapeIsInvalidArgumentWithBothShapes) {
  const std::string path = FreshDir() + "/m.safetensors";
  SafetensorsWriter writer;
  writer.Add("w", DType::kF32, {4, 6}, Bytes(96, 0));
  ASSERT_TRUE(writer.WriteFile(path).ok());
  auto archive = SafetensorsArchive::OpenFile(path);
  ASSERT_TRUE(archive.ok()) << archive.status();
  for (const std::vector<int64_t>& wrong : {std::vector<int64_t>{6, 4}, {24}, {4, 6, 1}}) {
    const absl::Status status = (*archive)->GetWithShape("w", wrong).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(status, "[4, 6]")) << status;
    EXPECT_TRUE(Contains(status, path)) << status;
  }
  EXPECT_TRUE((*archive)->GetWithShape("w", {4, 6}).ok());
}

TEST(SafetensorsTest, MissingFilesAreNotFound) {
  const std::string dir = FreshDir();
  auto file = SafetensorsArchive::OpenFile(dir + "/nope.safetensors");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(file.status(), dir + "/nope.safetensors")) << file.status();
  auto directory = SafetensorsArchive::OpenDirectory(dir);
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(directory.status(), dir)) << directory.status();
}

TEST(SafetensorsTest, TruncatedFilesAreDataLoss) {
  const std::string dir = FreshDir();
  const std::string good_path = dir + "/good.safetensors";
  SafetensorsWriter writer;
  writer.Add("first", DType::kF32, {8}, Bytes(32, 0));
  writer.Add("last", DType::kF32, {8}, Bytes(32, 1));
  ASSERT_TRUE(writer.WriteFile(good_path).ok());
  const std::string good = ReadBytes(good_path);
  ASSERT_TRUE(SafetensorsArchive::OpenFile(good_path).ok());

  struct Cut {
    size_t keep;
    const char* expect;
  };
  const size_t header_end = good.size() - 64;
  for (const Cut& cut : {Cut{0, "truncated"}, Cut{5, "truncated"}, Cut{20, "truncated"},
                         Cut{header_end - 1, "truncated"}, Cut{good.size() - 1, "'last'"},
                         Cut{header_end + 10, "'first'"}}) {
    const std::string path = dir + "/cut.safetensors";
    WriteBytes(path, good.substr(0, cut.keep));
    const absl::Status status = SafetensorsArchive::OpenFile(path).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << "kept " << cut.keep << ": " << status;
    EXPECT_TRUE(Contains(status, path)) << status;
    EXPECT_TRUE(Contains(status, cut.expect)) << status;
  }
}

TEST(SafetensorsTest, OversizedHeaderLengthIsRefusedBeforeReading) {
  const std::string path = FreshDir() + "/big.safetensors";
  for (const uint64_t claimed : {uint64_t{100'000'001}, uint64_t{1} << 40, ~uint64_t{0}}) {
    WriteBytes(path, RawSafetensors("{}", "", claimed));
    const absl::Status status = SafetensorsArchive::OpenFile(path).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << claimed;
    EXPECT_TRUE(Contains(status, "exceeds")) << status;
    EXPECT_TRUE(Contains(status, path)) << status;
  }
}

// A one-file case: header text, data size, expected code and message fragment.
struct BadHeader {
  const char* description;
  std::string header;
  size_t data_bytes;
  absl::StatusCode code;
  const char* expect;
};

TEST(SafetensorsTest, BadHeadersNameTheFault) {
  const std::vector<BadHeader> cases = {
      {"not json", "{\"w\": {", 0, absl::StatusCode::kInvalidArgument, "not valid JSON"},
      {"json array", "[1, 2]", 0, absl::StatusCode::kInvalidArgument, "not a JSON object"},
      {"entry not object", R"({"w": 3})", 0, absl::StatusCode::kInvalidArgument, "'w'"},
      {"unknown dtype", R"({"w": {"dtype": "Q4_K", "shape": [2], "data_offsets": [0, 8]}})", 8,
       absl::StatusCode::kInvalidArgument, "Q4_K"},
      {"unsupported dtype", R"({"w": {"dtype": "I8", "shape": [2], "data_offsets": [0, 2]}})", 2,
       absl::StatusCode::kUnimplemented, "I8"},
      {"unsupported F64", R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8,
       absl::StatusCode::kUnimplemented, "F64"},
      {"missing dtype", R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", 8,
       absl::StatusCode::kInvalidArgument, "dtype"},
      {"missing shape", R"({"w": {"dtype": "F32", "data_offsets": [0, 8]}})", 8,
       absl::StatusCode::kInvalidArgument, "shape"},
      {"missing offsets", R"({"w": {"dtype": "F32", "shape": [2]}})", 8,
       absl::StatusCode::kInvalidArgument, "data_offsets"},
      {"three offsets", R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4, 8]}})", 8,
       absl::StatusCode::kInvalidArgument, "data_offsets"},
      {"negative dim", R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8,
       absl::StatusCode::kInvalidArgument, "dimension"},
      {"string dim", R"({"w": {"dtype": "F32", "shape": ["2"], "data_offsets": [0, 8]}})", 8,
       absl::StatusCode::kInvalidArgument, "dimension"},
      {"size mismatch", R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24,
       absl::StatusCode::kInvalidArgument, "needs 24"},
      {"dtype size mismatch", R"({"w": {"dtype": "F16", "shape": [4], "data_offsets": [0, 16]}})",
       16, absl::StatusCode::kInvalidArgument, "needs 8"},
      {"element count overflows",
       R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4611686018427387904, 16],
           "data_offsets": [0, 0]}})",
       8, absl::StatusCode::kInvalidArgument, "more than the file holds"},
      {"begin after end", R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})", 8,
       absl::StatusCode::kInvalidArgument, "data_offsets"},
      {"negative offset", R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}})", 8,
       absl::StatusCode::kInvalidArgument, "data_offsets"},
      {"end past data", R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 12,
       absl::StatusCode::kDataLoss, "'w'"},
      {"huge offsets",
       R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551612, 18446744073709551615]}})",
       8, absl::StatusCode::kDataLoss, "'w'"},
      {"overlapping tensors",
       R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
           "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
       24, absl::StatusCode::kInvalidArgument, "overlap"},
      {"same range twice",
       R"({"a": {"dtype": "F16", "shape": [2], "data_offsets": [4, 8]},
           "b": {"dtype": "BF16", "shape": [2], "data_offsets": [4, 8]}})",
       8, absl::StatusCode::kInvalidArgument, "overlap"},
  };
  const std::string dir = FreshDir();
  for (const BadHeader& bad : cases) {
    const std::string path = dir + "/bad.safetensors";
    WriteBytes(path, RawSafetensors(bad.header, std::string(bad.data_bytes, '\x01')));
    const absl::Status status = SafetensorsArchive::OpenFile(path).status();
    EXPECT_EQ(status.code(), bad.code) << bad.description << ": " << status;
    EXPECT_TRUE(Contains(status, bad.expect)) << bad.description << ": " << status;
    EXPECT_TRUE(Contains(status, path)) << bad.description << ": " << status;
  }
}

TEST(SafetensorsTest, HandMadeFileWithMetadataAndGapsReads) {
  // __metadata__ is skipped; unused bytes between tensors are allowed (only overlap is not).
  const std::string path = FreshDir() + "/ok.safetensors";
  const std::string header =
      R"({"__metadata__": {"format": "pt"},
          "x": {"dtype": "BF16", "shape": [2], "data_offsets": [8, 12]},
          "y": {"dtype": "F32", "shape": [1, 1], "data_offsets": [0, 4]}})";
  WriteBytes(path, RawSafetensors(header, "ABCDEFGHIJKL"));
  auto archive = SafetensorsArchive::OpenFile(path);
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_EQ((*archive)->TensorNames(), (std::vector<std::string>{"x", "y"}));
  absl::StatusOr<TensorView> x = (*archive)->GetWithShape("x", {2});
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(x->data), x->n_bytes), "IJKL");
  absl::StatusOr<TensorView> y = (*archive)->GetWithShape("y", {1, 1});
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(y->data), y->n_bytes), "ABCD");
}

}  // namespace
}  // namespace splitspec::engine
