// deploy/grafana/splitspec.json, deploy/prometheus/prometheus.yml and docs/observability.md
// against the metric sets: the dashboard is importable (structure) and every metric name its
// PromQL uses is one the code exports, so dashboard, docs and code cannot drift apart.
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/metrics/exposition_parser.h"
#include "tests/unit/metrics/sample_traffic.h"

namespace splitspec::metrics {
namespace {

std::string ReadFile(const std::string& relative) {
  std::ifstream in(std::string(SPLITSPEC_SOURCE_DIR) + "/" + relative);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

nlohmann::json LoadDashboard() {
  const std::string text = ReadFile("deploy/grafana/splitspec.json");
  EXPECT_FALSE(text.empty()) << "deploy/grafana/splitspec.json missing";
  nlohmann::json dashboard = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(dashboard.is_discarded()) << "dashboard is not valid JSON";
  return dashboard;
}

// Every sample name and family name a scrape of all three services contains.
struct Exported {
  std::set<std::string> sample_names;
  std::set<std::string> family_names;
};

Exported ExportedNames() {
  Exported out;
  MetricsRegistry registry;
  auto sets = testing::CreateAndFeedAll(registry, 5, 3);
  EXPECT_TRUE(sets.ok()) << sets.status();
  auto parsed = testing::ParseExposition(registry.Serialize());
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return out;
  for (const auto& s : parsed->samples) out.sample_names.insert(s.name);
  for (const auto& [family, type] : parsed->types) out.family_names.insert(family);
  return out;
}

// Metric names (splitspec_ identifiers) in a PromQL expression. A hand scan rather than
// std::regex, which trips GCC 12's -Wmaybe-uninitialized in sanitizer builds.
std::set<std::string> MetricNames(const std::string& expr) {
  std::set<std::string> names;
  const std::string prefix = "splitspec_";
  auto is_ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t pos = expr.find(prefix); pos != std::string::npos; pos = expr.find(prefix, pos)) {
    if (pos > 0 && is_ident(expr[pos - 1])) {  // inside a longer identifier
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < expr.size() && is_ident(expr[end])) ++end;
    names.insert(expr.substr(pos, end - pos));
    pos = end;
  }
  return names;
}

// True when every "by (...)" clause of `expr` keeps the label le.
bool EveryByKeepsLe(const std::string& expr) {
  bool any = false;
  for (size_t pos = expr.find("by ("); pos != std::string::npos; pos = expr.find("by (", pos)) {
    const size_t close = expr.find(')', pos);
    if (close == std::string::npos) return false;
    std::stringstream labels(expr.substr(pos + 4, close - pos - 4));
    std::string label;
    bool has_le = false;
    while (std::getline(labels, label, ',')) {
      label.erase(0, label.find_first_not_of(' '));
      label.erase(label.find_last_not_of(' ') + 1);
      has_le = has_le || label == "le";
    }
    if (!has_le) return false;
    any = true;
    pos = close;
  }
  return any;
}

// All PromQL in the dashboard: panel targets and templating queries.
std::vector<std::string> Expressions(const nlohmann::json& dashboard) {
  std::vector<std::string> exprs;
  for (const auto& panel : dashboard["panels"]) {
    if (!panel.contains("targets")) continue;
    for (const auto& target : panel["targets"]) exprs.push_back(target.value("expr", ""));
  }
  for (const auto& var : dashboard["templating"]["list"]) {
    if (var.value("type", "") == "query") exprs.push_back(var.value("definition", ""));
  }
  return exprs;
}

TEST(DashboardTest, IsAnImportableDashboardWithAPrometheusDatasourceVariable) {
  const nlohmann::json d = LoadDashboard();
  ASSERT_TRUE(d.is_object());
  EXPECT_FALSE(d.value("title", "").empty());
  EXPECT_FALSE(d.value("uid", "").empty());
  EXPECT_GE(d.value("schemaVersion", 0), 36);
  ASSERT_TRUE(d["panels"].is_array());
  ASSERT_TRUE(d["templating"]["list"].is_array());

  bool has_datasource_var = false;
  for (const auto& var : d["templating"]["list"]) {
    if (var.value("type", "") == "datasource" && var.value("query", "") == "prometheus" &&
        var.value("name", "") == "datasource") {
      has_datasource_var = true;
    }
  }
  EXPECT_TRUE(has_datasource_var);

  std::set<int> ids;
  int n_graphs = 0;
  for (const auto& panel : d["panels"]) {
    const std::string title = panel.value("title", "");
    EXPECT_FALSE(title.empty());
    ASSERT_TRUE(panel.contains("id") && panel["id"].is_number_integer()) << title;
    EXPECT_TRUE(ids.insert(panel["id"].get<int>()).second) << "duplicate id in " << title;
    const auto& grid = panel["gridPos"];
    for (const char* key : {"x", "y", "w", "h"}) {
      EXPECT_TRUE(grid.contains(key) && grid[key].is_number_integer()) << title << " " << key;
    }
    EXPECT_LE(grid.value("x", 0) + grid.value("w", 0), 24) << title;
    if (panel.value("type", "") == "row") continue;
    ++n_graphs;
    // Every query goes through the datasource variable, so the dashboard imports anywhere.
    EXPECT_EQ(panel["datasource"].value("uid", ""), "${datasource}") << title;
    ASSERT_TRUE(panel["targets"].is_array() && !panel["targets"].empty()) << title;
    std::set<std::string> ref_ids;
    for (const auto& target : panel["targets"]) {
      EXPECT_FALSE(target.value("expr", "").empty()) << title;
      EXPECT_TRUE(ref_ids.insert(target.value("refId", "")).second) << title;
      EXPECT_EQ(target["datasource"].value("uid", ""), "${datasource}") << title;
    }
  }
  EXPECT_GE(n_graphs, 12);
}

TEST(DashboardTest, HasAPanelForEveryServingAndSpeculationFigure) {
  const nlohmann::json d = LoadDashboard();
  std::set<std::string> titles;
  for (const auto& panel : d["panels"]) titles.insert(panel.value("title", ""));
  for (const char* want :
       {"Accept length over time", "Acceptance rate by draft position", "Active tier / mean k",
        "Proposal-length distribution", "Goodput: estimated vs observed", "Output tokens/s",
        "Time to first token p50 / p99", "Inter-token latency p50 / p99",
        "End-to-end latency p50 / p99", "Queue and running requests", "KV usage per worker",
        "Step-time breakdown", "Draft-ahead: drafts kept and draft time hidden", "Step overhead p50 / p99"}) {
    EXPECT_EQ(titles.count(want), 1u) << "missing panel: " << want;
  }
}

TEST(DashboardTest, EveryMetricInThePromQLIsExported) {
  const nlohmann::json d = LoadDashboard();
  const Exported exported = ExportedNames();
  ASSERT_FALSE(exported.sample_names.empty());
  std::set<std::string> used;
  for (const std::string& expr : Expressions(d)) {
    for (const std::string& name : MetricNames(expr)) used.insert(name);
    // Quantiles only make sense over a histogram's buckets, aggregated with le kept.
    if (expr.find("histogram_quantile") != std::string::npos) {
      EXPECT_NE(expr.find("_bucket"), std::string::npos) << expr;
      EXPECT_TRUE(EveryByKeepsLe(expr)) << "histogram_quantile without 'by (le, ...)': " << expr;
    }
  }
  ASSERT_GE(used.size(), 15u);
  for (const std::string& name : used) {
    EXPECT_EQ(exported.sample_names.count(name), 1u) << "dashboard uses unknown metric " << name;
  }
  // And the dashboard covers the speculation and serving families it is about.
  for (const char* must :
       {"splitspec_spec_decode_num_accepted_tokens_per_pos_total", "splitspec_spec_active_tier",
        "splitspec_worker_kv_blocks_used", "splitspec_step_stage_duration_seconds_sum", "splitspec_draft_ahead_total",
        "splitspec_draft_hidden_seconds_total", "splitspec_step_overhead_seconds_bucket"}) {
    EXPECT_EQ(used.count(must), 1u) << must;
  }
}

TEST(DashboardTest, DocsCatalogueEveryExportedFamily) {
  const std::string docs = ReadFile("docs/observability.md");
  ASSERT_FALSE(docs.empty()) << "docs/observability.md missing";
  const Exported exported = ExportedNames();
  ASSERT_GE(exported.family_names.size(), 20u);
  for (const std::string& family : exported.family_names) {
    EXPECT_NE(docs.find("`" + family + "`"), std::string::npos)
        << family << " is not in the catalogue of docs/observability.md";
  }
}

TEST(DashboardTest, ScrapeConfigTargetsTheDefaultPorts) {
  const std::string config = ReadFile("deploy/prometheus/prometheus.yml");
  for (const char* target : {"localhost:9400", "localhost:9401", "localhost:9402"}) {
    EXPECT_NE(config.find(target), std::string::npos) << target;
  }
}

}  // namespace
}  // namespace splitspec::metrics
