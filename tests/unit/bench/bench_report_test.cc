// Report writers of `splitspec bench`: CSV shape and quoting, JSON contents.
#include "tools/bench_report.h"

#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace splitspec::tools::bench {
namespace {

std::vector<LevelResult> TwoLevels() {
  RequestRecord ok;
  ok.ok = true;
  ok.item_id = "chat,1 \"quoted\"";
  ok.ttft_s = 0.1;
  ok.e2e_s = 0.5;
  ok.itl_s = {0.2, 0.2};
  ok.output_tokens = 5;
  ok.steps = 2;
  ok.accepted_tokens = 2;
  ok.drafted_tokens = 4;
  RequestRecord failed;
  failed.item_id = "x";
  failed.error = "deadline exceeded, cancelled";
  LevelResult a;
  a.rate = 2;
  a.records = {ok, failed};
  a.summary = SummarizeRun(a.records);
  LevelResult b;
  b.rate = std::numeric_limits<double>::infinity();
  b.records = {ok};
  b.summary = SummarizeRun(b.records);
  return {a, b};
}

// Splits CSV text into rows of fields, honouring RFC 4180 quotes.
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        rows.back().back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        rows.back().back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().emplace_back();
    } else if (c == '\n') {
      rows.emplace_back(1);
    } else {
      rows.back().back() += c;
    }
  }
  if (rows.back().size() == 1 && rows.back()[0].empty()) rows.pop_back();
  return rows;
}

TEST(ReportTest, SummaryCsvHasOneRowPerLevelAndMatchingColumns) {
  const auto rows = ParseCsv(SummaryCsv(TwoLevels()));
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows) EXPECT_EQ(row.size(), rows[0].size());
  EXPECT_EQ(rows[0][1], "rate");
  EXPECT_EQ(rows[1][1], "2");
  EXPECT_EQ(rows[2][1], "inf");
  EXPECT_EQ(rows[1][4], "1");  // completed
  EXPECT_EQ(rows[1][5], "1");  // failed
}

TEST(ReportTest, RequestsCsvQuotesFreeText) {
  const auto rows = ParseCsv(RequestsCsv(TwoLevels()));
  ASSERT_EQ(rows.size(), 4u);  // header + 2 + 1
  for (const auto& row : rows) EXPECT_EQ(row.size(), rows[0].size());
  EXPECT_EQ(rows[1][1], "chat,1 \"quoted\"");
  EXPECT_EQ(rows[1][8], "3");  // chunks: 1 + two gaps
  EXPECT_EQ(rows[2][rows[2].size() - 1], "deadline exceeded, cancelled");
  EXPECT_EQ(rows[2][7], "");  // no TPOT for a failed request
}

TEST(ReportTest, JsonCarriesSettingsSummariesAndRequests) {
  const nlohmann::json json = ToJson({{"policy", "static:3"}}, TwoLevels());
  EXPECT_EQ(json["settings"]["policy"], "static:3");
  ASSERT_EQ(json["levels"].size(), 2u);
  EXPECT_EQ(json["levels"][0]["rate"], 2.0);
  EXPECT_EQ(json["levels"][1]["rate"], "inf");  // JSON has no infinity
  EXPECT_EQ(json["levels"][0]["summary"]["completed"], 1);
  EXPECT_EQ(json["levels"][0]["summary"]["failed"], 1);
  EXPECT_DOUBLE_EQ(json["levels"][0]["summary"]["mean_accept_length"].get<double>(), 2.0);
  EXPECT_NEAR(json["levels"][0]["summary"]["ttft"]["mean_ms"].get<double>(), 100.0, 1e-9);
  EXPECT_EQ(json["levels"][0]["requests"].size(), 2u);
  EXPECT_EQ(json["levels"][0]["requests"][0]["itl_ms"].size(), 2u);
  // The dump must be valid JSON that reads back.
  EXPECT_FALSE(nlohmann::json::parse(json.dump(), nullptr, false).is_discarded());
}

TEST(ReportTest, TextMentionsEveryLevel) {
  const std::string table = FormatTable(TwoLevels());
  EXPECT_NE(table.find("rate 2/s"), std::string::npos);
  EXPECT_NE(table.find("rate inf"), std::string::npos);
  const std::string block = FormatLevel(TwoLevels()[0]);
  EXPECT_NE(block.find("first error: x: deadline exceeded"), std::string::npos);
}

}  // namespace
}  // namespace splitspec::tools::bench
