// Metrics of the real services on loopback: `promtool check metrics` on every service's
// /metrics while requests run; router and worker counters checked against what the clients
// were told (usage in the final messages) and what the test sent; /server_info and
// GetServerInfo; RPC errors by code; and a real Prometheus (tests/integration/
// prometheus_scrape.py) scraping all of them and evaluating every dashboard expression.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/rpc/worker_clients.h"
#include "nlohmann/json.hpp"
#include "splitspec/v1/drafter.grpc.pb.h"
#include "splitspec/v1/router.grpc.pb.h"
#include "splitspec/v1/verifier.grpc.pb.h"
#include "tests/integration/cluster.h"
#include "tests/integration/metrics_traffic.h"
#include "tests/unit/metrics/exposition_parser.h"

namespace splitspec::testing {
namespace {

using metrics::testing::Exposition;
using metrics::testing::ParseExposition;

// A router over both test pools with its own metrics port; its metrics start from zero.
struct RouterUnderTest {
  std::unique_ptr<Process> process;
  std::string metrics;  // HOST:PORT of its /metrics
};

RouterUnderTest StartRouter(const std::string& policy) {
  Cluster& cluster = Cluster::Get();
  RouterUnderTest r;
  r.process = cluster.StartRouter({"--drafter", "model=" + cluster.model_drafter(), "--drafter",
                                   "ngram=" + cluster.ngram_drafter(), "--policy", policy});
  r.metrics = ReadMetricsAddress(*r.process);
  return r;
}

Exposition Scrape(const std::string& address) {
  const HttpResult res = HttpGet(address, "/metrics");
  EXPECT_EQ(res.status, 200) << address;
  auto parsed = ParseExposition(res.body);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : Exposition{};
}

double Sum(const Exposition& e, const std::string& name, const std::map<std::string, std::string>& labels = {}) {
  double total = 0;
  for (const auto& s : e.Find(name, labels)) total += s.value;
  return total;
}

// Polls `value` until it equals `want` or 20 s pass (the deadline only bounds a failure: the
// figures settle once the router's loop has run its next step or gone idle).
double WaitForValue(const std::function<double()>& value, double want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  double now = value();
  while (now != want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = value();
  }
  return now;
}

TEST(MetricsIntegrationTest, PromtoolPassesOnEveryServiceDuringTraffic) {
  ASSERT_EQ(std::system("command -v promtool > /dev/null"), 0) << "promtool (Debian package prometheus) missing";
  Cluster& cluster = Cluster::Get();
  RouterUnderTest router = StartRouter("static:3");
  // "During a run": the client threads send until Stop() (the cap only bounds memory), and the
  // scrapes start once the router reports output streamed and requests in its batch.
  Traffic traffic(router.process->address(), MixedRequests(16, 24), /*n_threads=*/3, /*max_requests=*/100000);
  const double mid_run = WaitForValue(
      [&] {
        const Exposition m = Scrape(router.metrics);
        return Sum(m, "splitspec_generation_tokens_total") > 0 && Sum(m, "splitspec_requests_running") > 0 ? 1.0 : 0.0;
      },
      1.0);
  ASSERT_EQ(mid_run, 1.0) << "the router never showed output and a running batch";
  const std::vector<std::pair<std::string, std::string>> services = {
      {"router", router.metrics},
      {"verifier", cluster.verifier_metrics()},
      {"drafter (model)", cluster.model_drafter_metrics()},
      {"drafter (ngram)", cluster.ngram_drafter_metrics()},
  };
  for (const auto& [name, address] : services) {
    const HttpResult res = HttpGet(address, "/metrics");
    ASSERT_EQ(res.status, 200) << name;
    ASSERT_NE(res.body.find("splitspec_"), std::string::npos) << name;
    const PromtoolResult lint = PromtoolCheckMetrics(res.body);
    EXPECT_EQ(lint.exit_code, 0) << name << ": " << lint.output;
    EXPECT_EQ(lint.output, "") << name << " lint findings:\n" << lint.output;
  }
  traffic.Stop();
  for (const RequestResult& r : traffic.Results()) EXPECT_TRUE(r.status.ok()) << r.status.error_message();
}

TEST(MetricsIntegrationTest, CountersMatchWhatClientsAndWorkersSaw) {
  Cluster& cluster = Cluster::Get();
  RouterUnderTest router = StartRouter("static:3");
  const Exposition verifier_before = Scrape(cluster.verifier_metrics());
  const Exposition model_before = Scrape(cluster.model_drafter_metrics());
  const Exposition ngram_before = Scrape(cluster.ngram_drafter_metrics());

  const std::vector<RequestSpec> requests = MixedRequests(12, 20);
  Traffic traffic(router.process->address(), requests, /*n_threads=*/4, static_cast<int>(requests.size()));
  traffic.Join();
  const std::vector<RequestResult> results = traffic.Results();
  ASSERT_EQ(results.size(), requests.size());
  double drafted = 0, accepted = 0, streamed = 0, prompt_tokens = 0;
  for (const RequestResult& r : results) {
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    drafted += r.usage.drafted_tokens();
    accepted += r.usage.accepted_tokens();
    streamed += r.streamed_tokens;
    EXPECT_EQ(r.streamed_tokens, r.usage.completion_tokens());
  }
  for (const RequestSpec& s : requests) prompt_tokens += static_cast<double>(s.prompt.size());
  ASSERT_GT(accepted, 0) << "no draft was accepted: the per-position checks would be vacuous";

  // Output tokens settle once the loop has recorded the final step.
  const double generation = WaitForValue(
      [&] { return Sum(Scrape(router.metrics), "splitspec_generation_tokens_total"); }, streamed);
  EXPECT_EQ(generation, streamed);
  const Exposition m = Scrape(router.metrics);
  const double n = static_cast<double>(requests.size());
  EXPECT_EQ(Sum(m, "splitspec_spec_decode_num_draft_tokens_total"), drafted);
  EXPECT_EQ(Sum(m, "splitspec_spec_decode_num_accepted_tokens_total"), accepted);
  // Every accepted token sits at exactly one draft position.
  EXPECT_EQ(Sum(m, "splitspec_spec_decode_num_accepted_tokens_per_pos_total"), accepted);
  const double drafts = Sum(m, "splitspec_spec_decode_num_drafts_total");
  EXPECT_GT(drafts, 0);
  EXPECT_EQ(Sum(m, "splitspec_spec_decode_accept_length_count"), drafts);
  EXPECT_EQ(Sum(m, "splitspec_spec_decode_accept_length_sum"), drafts + accepted);
  // Each pool's series exist with the policy label.
  EXPECT_EQ(m.Find("splitspec_spec_decode_num_drafts_total", {{"pool", "ngram"}, {"policy", "static:3"}}).size(), 1u);
  EXPECT_EQ(m.Find("splitspec_spec_decode_num_drafts_total", {{"pool", "model"}, {"policy", "static:3"}}).size(), 1u);
  // static:3 never proposes more than 3.
  EXPECT_EQ(Sum(m, "splitspec_spec_decode_num_accepted_tokens_per_pos_total", {{"position", "3"}}), 0);
  EXPECT_LE(Sum(m, "splitspec_spec_active_tier"), 2 * 3.0);  // two pools, each at most k = 3

  EXPECT_EQ(Sum(m, "splitspec_requests_total", {{"status", "length"}}), n);
  EXPECT_EQ(Sum(m, "splitspec_requests_total"), n);
  EXPECT_EQ(Sum(m, "splitspec_prompt_tokens_total"), prompt_tokens);
  EXPECT_EQ(Sum(m, "splitspec_time_to_first_token_seconds_count"), n);
  EXPECT_EQ(Sum(m, "splitspec_e2e_request_latency_seconds_count"), n);
  EXPECT_EQ(Sum(m, "splitspec_request_queue_time_seconds_count"), n);
  // One inter-token gap per token after each request's first.
  EXPECT_EQ(Sum(m, "splitspec_inter_token_latency_seconds_count"), streamed - n);
  EXPECT_EQ(Sum(m, "splitspec_requests_waiting"), 0);
  EXPECT_EQ(Sum(m, "splitspec_requests_running"), 0);
  for (const char* stage : {"schedule", "draft", "verify", "rpc_overhead", "router"}) {
    EXPECT_GT(Sum(m, "splitspec_step_stage_duration_seconds_count", {{"stage", stage}}), 0) << stage;
  }
  EXPECT_GT(Sum(m, "splitspec_spec_goodput_observed_tokens_per_second"), 0);
  EXPECT_GT(Sum(m, "splitspec_spec_goodput_estimated_tokens_per_second"), 0);

  // /server_info (SGLang's shape) and GetServerInfo agree with the counters.
  const HttpResult info_http = HttpGet(router.metrics, "/server_info");
  ASSERT_EQ(info_http.status, 200);
  const nlohmann::json info = nlohmann::json::parse(info_http.body);
  EXPECT_DOUBLE_EQ(info["avg_spec_accept_length"].get<double>(), 1.0 + accepted / drafts);
  EXPECT_DOUBLE_EQ(info["spec_acceptance_rate"].get<double>(), accepted / drafted);
  ASSERT_TRUE(info["speculative_num_steps"].is_number());
  EXPECT_EQ(info["policy"], "static:3");
  ASSERT_EQ(info["internal_states"].size(), 2u);
  EXPECT_TRUE(info["internal_states"][0]["avg_spec_accept_length"].is_number());
  auto stub = v1::Router::NewStub(rpc::MakeChannel(router.process->address()));
  grpc::ClientContext context;
  v1::ServerInfo rpc_info;
  ASSERT_TRUE(stub->GetServerInfo(&context, v1::GetServerInfoRequest(), &rpc_info).ok());
  EXPECT_DOUBLE_EQ(rpc_info.avg_spec_accept_length(), 1.0 + accepted / drafts);
  EXPECT_DOUBLE_EQ(rpc_info.spec_acceptance_rate(), accepted / drafted);
  EXPECT_DOUBLE_EQ(rpc_info.speculative_num_steps(), info["speculative_num_steps"].get<double>());
  EXPECT_EQ(nlohmann::json::parse(rpc_info.server_info_json())["spec_num_drafts"].get<double>(), drafts);

  // Verifier: one prefill of each prompt, KV blocks adding up to its --kv-blocks, sessions
  // released once the router has told it.
  const auto verifier_delta = [&](const Exposition& after, const std::string& name, const std::string& kind) {
    const std::map<std::string, std::string> labels = {{"role", "verifier"}, {"kind", kind}};
    return Sum(after, name, labels) - Sum(verifier_before, name, labels);
  };
  const double live = WaitForValue(
      [&] { return Sum(Scrape(cluster.verifier_metrics()), "splitspec_worker_live_sessions"); }, 0);
  EXPECT_EQ(live, 0);
  const Exposition v = Scrape(cluster.verifier_metrics());
  EXPECT_EQ(verifier_delta(v, "splitspec_worker_forward_tokens_sum", "prefill"), prompt_tokens);
  EXPECT_EQ(verifier_delta(v, "splitspec_worker_forward_batch_size_sum", "prefill"), n);
  EXPECT_GT(verifier_delta(v, "splitspec_worker_forward_duration_seconds_count", "verify"), 0);
  // Verify forwards feed each request's pending token and its drafts; every verify step
  // emits one token per request beyond its accepted drafts, and the prefill emits the first.
  EXPECT_EQ(verifier_delta(v, "splitspec_worker_forward_tokens_sum", "verify") -
                verifier_delta(v, "splitspec_worker_forward_batch_size_sum", "verify"),
            drafted);
  EXPECT_EQ(verifier_delta(v, "splitspec_worker_forward_batch_size_sum", "verify") + accepted + n, streamed);
  EXPECT_EQ(Sum(v, "splitspec_worker_kv_blocks_used") + Sum(v, "splitspec_worker_kv_blocks_free"), 2048);
  EXPECT_EQ(Sum(v, "splitspec_worker_kv_blocks_used"), 0);

  // Drafters: both pools drafted.
  for (const auto& [address, before] : {std::make_pair(cluster.model_drafter_metrics(), &model_before),
                                        std::make_pair(cluster.ngram_drafter_metrics(), &ngram_before)}) {
    const Exposition d = Scrape(address);
    const std::map<std::string, std::string> labels = {{"role", "drafter"}, {"kind", "draft_step"}};
    EXPECT_GT(Sum(d, "splitspec_worker_forward_duration_seconds_count", labels) -
                  Sum(*before, "splitspec_worker_forward_duration_seconds_count", labels),
              0)
        << address;
  }
}

TEST(MetricsIntegrationTest, WorkerRpcErrorsAreCountedByCode) {
  Cluster& cluster = Cluster::Get();
  const auto errors = [](const std::string& address, const std::string& code) {
    return Sum(Scrape(address), "splitspec_worker_rpc_errors_total", {{"code", code}});
  };

  // Verify for a session the verifier never saw: the item's own status, counted by code like
  // a failed call.
  auto verifier = v1::Verifier::NewStub(rpc::MakeChannel(cluster.verifier()));
  v1::VerifyRequest verify;
  verify.add_items()->set_request_id(987654321);
  v1::VerifyResponse verify_response;
  grpc::ClientContext verify_context;
  ASSERT_TRUE(verifier->Verify(&verify_context, verify, &verify_response).ok());
  ASSERT_EQ(verify_response.results_size(), 1);
  const int verify_item_code = verify_response.results(0).status().code();
  ASSERT_NE(verify_item_code, 0);
  const std::string verify_code = absl::StatusCodeToString(static_cast<absl::StatusCode>(verify_item_code));
  const double verifier_errors_before = errors(cluster.verifier_metrics(), verify_code);
  grpc::ClientContext verify_context2;
  ASSERT_TRUE(verifier->Verify(&verify_context2, verify, &verify_response).ok());
  EXPECT_EQ(verify_response.results(0).status().code(), verify_item_code);
  EXPECT_EQ(errors(cluster.verifier_metrics(), verify_code), verifier_errors_before + 1) << verify_code;

  // Propose claiming history the drafter does not hold: FAILED_PRECONDITION by contract.
  auto drafter = v1::Drafter::NewStub(rpc::MakeChannel(cluster.ngram_drafter()));
  v1::ProposeRequest propose;
  v1::ProposeItem* item = propose.add_items();
  item->set_request_id(987654321);
  item->set_known_length(5);
  item->add_new_tokens(3);
  item->mutable_shape()->set_depth(2);
  item->mutable_shape()->set_branching(1);
  const double drafter_errors_before = errors(cluster.ngram_drafter_metrics(), "FAILED_PRECONDITION");
  v1::ProposeResponse propose_response;
  grpc::ClientContext propose_context;
  ASSERT_TRUE(drafter->Propose(&propose_context, propose, &propose_response).ok());
  ASSERT_EQ(propose_response.results_size(), 1);
  EXPECT_EQ(propose_response.results(0).status().code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(errors(cluster.ngram_drafter_metrics(), "FAILED_PRECONDITION"), drafter_errors_before + 1);
  EXPECT_EQ(errors(cluster.ngram_drafter_metrics(), "INVALID_ARGUMENT"), 0);
}

// A real Prometheus (started and stopped by tests/integration/prometheus_scrape.py) scrapes the
// router, a drafter and the verifier while requests run; the script checks that accepted
// tokens are > 0 and that every dashboard expression evaluates. Extra script arguments (e.g.
// "--run-seconds 40 --range-out FILE" for deploy/grafana/render_dashboard.py) can be passed
// in SPLITSPEC_PROMETHEUS_SCRAPE_ARGS.
TEST(PrometheusScrapeTest, DashboardQueriesEvaluateAgainstRealServices) {
  ASSERT_EQ(std::system("command -v prometheus > /dev/null"), 0) << "prometheus (Debian package) missing";
  Cluster& cluster = Cluster::Get();
  RouterUnderTest router = StartRouter("sglang-tiers");
  Traffic traffic(router.process->address(), MixedRequests(24, 32), /*n_threads=*/3, /*max_requests=*/100000);
  const char* extra = std::getenv("SPLITSPEC_PROMETHEUS_SCRAPE_ARGS");
  const std::string command =
      std::string("/usr/bin/python3 ") + SPLITSPEC_SOURCE_DIR + "/tests/integration/prometheus_scrape.py" +
      " --router " + router.metrics + " --drafter " + cluster.model_drafter_metrics() + "," +
      cluster.ngram_drafter_metrics() + " --verifier " + cluster.verifier_metrics() + " " +
      (extra != nullptr ? extra : "") + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  size_t got;
  while ((got = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, got);
  const int status = pclose(pipe);
  traffic.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_NE(output.find("\nPASS"), std::string::npos) << output;
  EXPECT_GT(traffic.Completed(), 0);
  std::printf("%s", output.c_str());
}

}  // namespace
}  // namespace splitspec::testing
