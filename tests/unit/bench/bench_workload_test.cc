// Workload files of `splitspec bench`: the JSONL format, its errors, and the shipped workloads.
#include "tools/bench_workload.h"

#include <filesystem>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace splitspec::tools::bench {
namespace {

TEST(ParseWorkloadTest, ReadsAllFieldsAndSkipsBlankLines) {
  const std::string text =
      "{\"prompt\": \"Hello\", \"id\": \"a\", \"max_tokens\": 16, \"category\": \"chat\", "
      "\"phase\": \"p1\"}\n"
      "\n"
      "   \n"
      "{\"prompt\": \"def f(x):\\n\", \"source\": \"ignored key\"}\n";
  auto items = ParseWorkload(text, "w.jsonl");
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[0].id, "a");
  EXPECT_EQ((*items)[0].prompt, "Hello");
  EXPECT_EQ((*items)[0].max_tokens, 16);
  EXPECT_EQ((*items)[0].category, "chat");
  EXPECT_EQ((*items)[0].phase, "p1");
  EXPECT_EQ((*items)[1].prompt, "def f(x):\n");
  EXPECT_EQ((*items)[1].max_tokens, 0);
  EXPECT_EQ((*items)[1].id, "w.jsonl:4");  // default id: source and line
}

TEST(ParseWorkloadTest, AcceptsCrLfLineEnds) {
  auto items = ParseWorkload("{\"prompt\": \"a\"}\r\n{\"prompt\": \"b\"}\r\n", "w");
  ASSERT_TRUE(items.ok()) << items.status();
  EXPECT_EQ(items->size(), 2u);
}

// Each bad line must fail with the line number in the message.
TEST(ParseWorkloadTest, ErrorsNameTheLine) {
  const std::string good = "{\"prompt\": \"ok\"}\n";
  const std::string bad_lines[] = {
      "{\"prompt\": \"unterminated}",
      "[\"prompt\", \"x\"]",
      "{\"id\": \"no-prompt\"}",
      "{\"prompt\": \"\"}",
      "{\"prompt\": 42}",
      "{\"prompt\": \"x\", \"max_tokens\": 0}",
      "{\"prompt\": \"x\", \"max_tokens\": 1.5}",
      "{\"prompt\": \"x\", \"max_tokens\": \"8\"}",
      "{\"prompt\": \"x\", \"max_tokens\": 100000000}",
      "{\"prompt\": \"x\", \"id\": 3}",
      "{\"prompt\": \"x\", \"category\": [\"chat\"]}",
  };
  for (const std::string& bad : bad_lines) {
    auto items = ParseWorkload(good + "\n" + bad + "\n", "w.jsonl");
    ASSERT_FALSE(items.ok()) << bad;
    EXPECT_EQ(items.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(items.status().message()).find("w.jsonl:3:"), std::string::npos)
        << bad << " -> " << items.status();
  }
}

TEST(ParseWorkloadTest, RejectsDuplicateIdsAndEmptyInput) {
  auto dup = ParseWorkload(
      "{\"prompt\": \"a\", \"id\": \"x\"}\n{\"prompt\": \"b\", \"id\": \"x\"}\n", "w");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(std::string(dup.status().message()).find("duplicate"), std::string::npos);
  EXPECT_FALSE(ParseWorkload("", "w").ok());
  EXPECT_FALSE(ParseWorkload("\n  \n", "w").ok());
}

TEST(LoadWorkloadTest, MissingFileIsNotFound) {
  auto items = LoadWorkload("/nonexistent/dir/workload.jsonl");
  ASSERT_FALSE(items.ok());
  EXPECT_EQ(items.status().code(), absl::StatusCode::kNotFound);
}

// Every workload shipped under bench/workloads/ parses, has enough prompts for a sweep cell, and
// the required kinds are there.
TEST(ShippedWorkloadsTest, AllParse) {
  const std::filesystem::path dir =
      std::filesystem::path(SPLITSPEC_SOURCE_DIR) / "bench" / "workloads";
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jsonl") continue;
    names.insert(entry.path().stem().string());
    auto items = LoadWorkload(entry.path().string());
    ASSERT_TRUE(items.ok()) << items.status();
    EXPECT_GE(items->size(), 20u) << entry.path();
  }
  for (const char* required : {"chat", "code", "qa", "mix"})
    EXPECT_TRUE(names.count(required)) << required;
}

TEST(ShippedWorkloadsTest, MixChangesPhase) {
  auto items = LoadWorkload(std::string(SPLITSPEC_SOURCE_DIR) + "/bench/workloads/mix.jsonl");
  ASSERT_TRUE(items.ok()) << items.status();
  std::set<std::string> phases;
  int changes = 0;
  for (size_t i = 0; i < items->size(); ++i) {
    phases.insert((*items)[i].phase);
    if (i > 0 && (*items)[i].phase != (*items)[i - 1].phase) ++changes;
  }
  EXPECT_GE(phases.size(), 2u);
  // Phases come in blocks, not interleaved item by item.
  EXPECT_GE(changes, 2);
  EXPECT_LT(changes, static_cast<int>(items->size()) / 4);
}

}  // namespace
}  // namespace splitspec::tools::bench
