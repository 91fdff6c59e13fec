// `promtool check metrics` (Prometheus' own linter) on the exposition of every metric set,
// populated and served over HTTP as a scraper would read it.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "common/metrics/metrics_http_server.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/support/scoped_temp_dir.h"
#include "tests/unit/metrics/sample_traffic.h"

namespace splitspec::metrics {
namespace {

struct PromtoolResult {
  int exit_code = -1;
  std::string output;
};

// Pipes `text` into `promtool check metrics` and returns its exit code and output. The output
// file lives in a fresh directory per call (ctest runs this binary's tests in parallel
// processes), removed on return.
PromtoolResult CheckMetrics(const std::string& text) {
  const splitspec::testing::ScopedTempDir dir("promtool_");
  const std::string out_path = dir.path() + "/output.txt";
  const std::string command = "promtool check metrics > '" + out_path + "' 2>&1";
  PromtoolResult result;
  FILE* pipe = popen(command.c_str(), "w");
  if (pipe == nullptr) return result;
  fwrite(text.data(), 1, text.size(), pipe);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(out_path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  result.output = buffer.str();
  return result;
}

TEST(PromtoolTest, PromtoolIsInstalled) {
  // The check below would pass vacuously if the shell could not find promtool.
  EXPECT_EQ(std::system("command -v promtool > /dev/null"), 0);
  // A known-bad exposition must fail, so a pass means something.
  const PromtoolResult bad = CheckMetrics(
      "# HELP splitspec_bad A counter without _total.\n# TYPE splitspec_bad counter\n"
      "splitspec_bad 1\n");
  EXPECT_NE(bad.exit_code, 0) << bad.output;
}

TEST(PromtoolTest, PopulatedRegistryPassesLintOverHttp) {
  MetricsRegistry registry;
  auto sets = testing::CreateAndFeedAll(registry, 40, 1);
  ASSERT_TRUE(sets.ok()) << sets.status();

  MetricsHttpServerOptions options;
  options.host = "127.0.0.1";
  MetricsHttpServer server(registry, options);
  ASSERT_TRUE(server.Start().ok());
  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  ASSERT_NE(res->body.find("splitspec_spec_decode_num_accepted_tokens_total"), std::string::npos);

  const PromtoolResult result = CheckMetrics(res->body);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "") << "promtool lint findings:\n" << result.output;
}

}  // namespace
}  // namespace splitspec::metrics
