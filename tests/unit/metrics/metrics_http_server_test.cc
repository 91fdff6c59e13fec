// MetricsHttpServer on loopback: /metrics, JSON endpoints, errors, port conflicts.
#include "common/metrics/metrics_http_server.h"

#include <string>

#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/unit/metrics/exposition_parser.h"

namespace splitspec::metrics {
namespace {

MetricsHttpServerOptions Loopback(int port = 0) {
  MetricsHttpServerOptions options;
  options.host = "127.0.0.1";
  options.port = port;
  return options;
}

TEST(MetricsHttpServerTest, ServesMetricsOnAChosenPort) {
  MetricsRegistry registry;
  auto family = registry.CounterFamily("splitspec_http_test_total", "HTTP test counter.");
  ASSERT_TRUE(family.ok());
  auto counter = MetricsRegistry::AddCounter(**family, {{"pool", "p"}});
  ASSERT_TRUE(counter.ok());
  (*counter)->Increment(41);

  MetricsHttpServer server(registry, Loopback());
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.port(), 0);

  httplib::Client client("127.0.0.1", server.port());
  (*counter)->Increment();  // the scrape must see the value at scrape time, not at Start
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4");
  auto parsed = testing::ParseExposition(res->body);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Value("splitspec_http_test_total", {{"pool", "p"}}), 42.0);
  EXPECT_EQ(res->body, registry.Serialize());

  auto missing = client.Get("/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  server.Stop();
  EXPECT_EQ(server.port(), 0);
  server.Stop();  // idempotent
}

TEST(MetricsHttpServerTest, JsonEndpointsAndTheirErrors) {
  MetricsRegistry registry;
  MetricsHttpServer server(registry, Loopback());
  int calls = 0;
  ASSERT_TRUE(server
                  .AddJsonEndpoint("/server_info",
                                   [&calls]() -> absl::StatusOr<nlohmann::json> {
                                     ++calls;
                                     return nlohmann::json{{"speculative_num_steps", 3}};
                                   })
                  .ok());
  ASSERT_TRUE(server
                  .AddJsonEndpoint("/broken",
                                   []() -> absl::StatusOr<nlohmann::json> {
                                     return absl::UnavailableError("drafter pool down");
                                   })
                  .ok());
  EXPECT_EQ(server.AddJsonEndpoint("/metrics", [] { return nlohmann::json{}; }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server.AddJsonEndpoint("server_info", [] { return nlohmann::json{}; }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server.AddJsonEndpoint("/server_info", [] { return nlohmann::json{}; }).code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(server.AddJsonEndpoint("/late", [] { return nlohmann::json{}; }).code(),
            absl::StatusCode::kFailedPrecondition);

  httplib::Client client("127.0.0.1", server.port());
  auto info = client.Get("/server_info");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->status, 200);
  EXPECT_EQ(info->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(nlohmann::json::parse(info->body)["speculative_num_steps"], 3);
  EXPECT_EQ(calls, 1);

  auto broken = client.Get("/broken");
  ASSERT_TRUE(broken);
  EXPECT_EQ(broken->status, 503);
  EXPECT_EQ(nlohmann::json::parse(broken->body)["error"], "drafter pool down");
}

TEST(MetricsHttpServerTest, PortInUseIsAClearError) {
  MetricsRegistry registry;
  MetricsHttpServer first(registry, Loopback());
  ASSERT_TRUE(first.Start().ok());
  MetricsHttpServer second(registry, Loopback(first.port()));
  const absl::Status status = second.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(status.message().find(std::to_string(first.port())), std::string::npos) << status;
  EXPECT_EQ(second.port(), 0);
  // The first server is unaffected.
  httplib::Client client("127.0.0.1", first.port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST(MetricsHttpServerTest, BadOptionsAndDoubleStart) {
  MetricsRegistry registry;
  MetricsHttpServer bad_port(registry, Loopback(70000));
  EXPECT_EQ(bad_port.Start().code(), absl::StatusCode::kInvalidArgument);
  MetricsHttpServer server(registry, Loopback());
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(server.Start().code(), absl::StatusCode::kFailedPrecondition);
}

// Start returns only once the port serves, and Stop (even right after Start) closes it: the
// port refuses connections and can be bound again at once.
TEST(MetricsHttpServerTest, StartServesAtOnceAndStopReleasesThePort) {
  MetricsRegistry registry;
  int port = 0;
  for (int i = 0; i < 20; ++i) {
    MetricsHttpServer server(registry, Loopback(port));
    ASSERT_TRUE(server.Start().ok()) << "round " << i << ", port " << port;
    port = server.port();
    if (i % 2 == 1) {
      // Every other round: a scrape straight after Start, then Stop.
      httplib::Client client("127.0.0.1", port);
      auto res = client.Get("/metrics");
      ASSERT_TRUE(res) << httplib::to_string(res.error());
      EXPECT_EQ(res->status, 200);
    }
    server.Stop();
    EXPECT_EQ(server.port(), 0);
    httplib::Client after("127.0.0.1", port);
    after.set_connection_timeout(1);
    EXPECT_FALSE(after.Get("/metrics")) << "port " << port << " still answers after Stop";
  }
}

}  // namespace
}  // namespace splitspec::metrics
