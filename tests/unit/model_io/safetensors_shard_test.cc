// Sharded checkpoints: model.safetensors.index.json's weight_map over several files, and the
// ways an index can disagree with its shards.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/engine/model/safetensors.h"
#include "nlohmann/json.hpp"
#include "tests/unit/model_io/test_files.h"

namespace splitspec::engine {
namespace {

using testing::FreshDir;
using testing::WriteBytes;

constexpr char kShard1[] = "model-00001-of-00002.safetensors";
constexpr char kShard2[] = "model-00002-of-00002.safetensors";

std::vector<uint8_t> Filled(size_t n, uint8_t value) { return std::vector<uint8_t>(n, value); }

// Shard 1: a (F32 [2]), b (F16 [3]); shard 2: c (BF16 [2, 2]).
std::string TwoShardDir() {
  const std::string dir = FreshDir();
  SafetensorsWriter one;
  one.Add("a", DType::kF32, {2}, Filled(8, 0xa1));
  one.Add("b", DType::kF16, {3}, Filled(6, 0xb2));
  EXPECT_TRUE(one.WriteFile(dir + "/" + kShard1).ok());
  SafetensorsWriter two;
  two.Add("c", DType::kBF16, {2, 2}, Filled(8, 0xc3));
  EXPECT_TRUE(two.WriteFile(dir + "/" + kShard2).ok());
  return dir;
}

void WriteIndex(const std::string& dir, const nlohmann::json& weight_map) {
  const nlohmann::json index = {{"metadata", {{"total_size", 22}}}, {"weight_map", weight_map}};
  WriteBytes(dir + "/model.safetensors.index.json", index.dump());
}

nlohmann::json GoodMap() { return {{"a", kShard1}, {"b", kShard1}, {"c", kShard2}}; }

absl::Status OpenStatus(const std::string& dir) {
  return SafetensorsArchive::OpenDirectory(dir).status();
}

TEST(SafetensorsShardTest, ReadsTensorsAcrossShards) {
  const std::string dir = TwoShardDir();
  WriteIndex(dir, GoodMap());
  auto archive = SafetensorsArchive::OpenDirectory(dir);
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_EQ((*archive)->TensorNames(), (std::vector<std::string>{"a", "b", "c"}));
  absl::StatusOr<TensorView> b = (*archive)->GetWithShape("b", {3});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->dtype, DType::kF16);
  EXPECT_EQ(std::vector<uint8_t>(b->data, b->data + b->n_bytes), Filled(6, 0xb2));
  EXPECT_EQ(b->file, dir + "/" + kShard1);
  absl::StatusOr<TensorView> c = (*archive)->GetWithShape("c", {2, 2});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(std::vector<uint8_t>(c->data, c->data + c->n_bytes), Filled(8, 0xc3));
  EXPECT_EQ(c->file, dir + "/" + kShard2);
  const absl::Status missing = (*archive)->Get("d").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find(dir), std::string::npos) << missing;
}

TEST(SafetensorsShardTest, IndexWinsOverStraySingleFile) {
  const std::string dir = TwoShardDir();
  WriteIndex(dir, GoodMap());
  WriteBytes(dir + "/model.safetensors", "garbage");  // would fail if it were read
  EXPECT_TRUE(OpenStatus(dir).ok()) << OpenStatus(dir);
}

TEST(SafetensorsShardTest, TensorMappedToWrongShardIsInvalid) {
  const std::string dir = TwoShardDir();
  nlohmann::json map = GoodMap();
  map["c"] = kShard1;
  map["x"] = kShard2;  // keep shard 2 referenced
  WriteIndex(dir, map);
  const absl::Status status = OpenStatus(dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("'c'"), std::string::npos) << status;
  EXPECT_NE(status.message().find("index.json"), std::string::npos) << status;
}

TEST(SafetensorsShardTest, MissingShardIsNotFoundNamingIt) {
  const std::string dir = TwoShardDir();
  nlohmann::json map = GoodMap();
  map["d"] = "model-00003-of-00003.safetensors";
  WriteIndex(dir, map);
  const absl::Status status = OpenStatus(dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("model-00003-of-00003.safetensors"), std::string::npos) << status;
}

TEST(SafetensorsShardTest, ShardNamesCannotLeaveTheDirectory) {
  for (const char* shard : {"../model.safetensors", "/etc/passwd", "..", ""}) {
    const std::string dir = TwoShardDir();
    nlohmann::json map = GoodMap();
    map["a"] = shard;
    WriteIndex(dir, map);
    const absl::Status status = OpenStatus(dir);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << shard;
    EXPECT_NE(status.message().find("bad shard name"), std::string::npos) << status;
  }
}

TEST(SafetensorsShardTest, DuplicateTensorAcrossShardsIsInvalid) {
  const std::string dir = TwoShardDir();
  SafetensorsWriter two;
  two.Add("a", DType::kF32, {2}, Filled(8, 0));
  two.Add("c", DType::kBF16, {2, 2}, Filled(8, 0));
  ASSERT_TRUE(two.WriteFile(dir + "/" + kShard2).ok());
  WriteIndex(dir, GoodMap());
  const absl::Status status = OpenStatus(dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("'a'"), std::string::npos) << status;
}

TEST(SafetensorsShardTest, MalformedIndexIsInvalid) {
  struct Case {
    const char* text;
    const char* expect;
  };
  for (const Case& c :
       {Case{"{", "not a JSON object"}, Case{"[]", "not a JSON object"},
        Case{"{\"metadata\": {}}", "weight_map"}, Case{"{\"weight_map\": []}", "weight_map"},
        Case{"{\"weight_map\": {}}", "empty weight_map"},
        Case{"{\"weight_map\": {\"a\": 5}}", "bad shard name"}}) {
    const std::string dir = TwoShardDir();
    WriteBytes(dir + "/model.safetensors.index.json", c.text);
    const absl::Status status = OpenStatus(dir);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(status.message().find(c.expect), std::string::npos) << c.text << ": " << status;
    EXPECT_NE(status.message().find("model.safetensors.index.json"), std::string::npos) << status;
  }
}

TEST(SafetensorsShardTest, CorruptShardReportsTheShard) {
  const std::string dir = TwoShardDir();
  WriteIndex(dir, GoodMap());
  WriteBytes(dir + "/" + kShard2, std::string(3, '\x10'));  // shorter than the length field
  const absl::Status status = OpenStatus(dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find(kShard2), std::string::npos) << status;
}

}  // namespace
}  // namespace splitspec::engine
