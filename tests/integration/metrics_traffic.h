// Test helpers for the metrics integration tests: Generate calls against a real router, a
// background traffic generator, HTTP GETs of a service's metrics endpoints, and promtool.
#ifndef SPLITSPEC_TESTS_INTEGRATION_METRICS_TRAFFIC_H_
#define SPLITSPEC_TESTS_INTEGRATION_METRICS_TRAFFIC_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "splitspec/v1/router.grpc.pb.h"

namespace splitspec::testing {

struct RequestSpec {
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  std::string pool;  // drafter pool, "" = the router picks
};

struct RequestResult {
  grpc::Status status;
  int64_t streamed_tokens = 0;  // token ids received over the stream
  v1::Usage usage;              // from the final message
};

// One Generate call (ignore_eos, greedy), read to the end.
RequestResult RunRequest(const std::string& router, const RequestSpec& spec);

// A mix of prompts over both pools of the test cluster ("model" and "ngram"), repetitive
// enough that the n-gram drafter gets drafts accepted.
std::vector<RequestSpec> MixedRequests(int n, int max_tokens);

// Sends requests from `n_threads` client threads until Stop() or `max_requests` were sent.
// Thread-safe: Stop and Results may be called from any thread.
class Traffic {
 public:
  Traffic(std::string router, std::vector<RequestSpec> mix, int n_threads, int max_requests);
  ~Traffic();  // Stop()
  // Lets in-flight requests finish, then joins the threads. Idempotent.
  void Stop();
  // Joins the threads once all `max_requests` have been sent and answered.
  void Join();
  std::vector<RequestResult> Results();
  int Completed();

 private:
  void Run();

  const std::string router_;
  const std::vector<RequestSpec> mix_;
  const int max_requests_;
  std::atomic<bool> stop_{false};
  std::atomic<int> next_{0};
  std::mutex mu_;
  std::vector<RequestResult> results_;
  std::vector<std::thread> threads_;
};

struct HttpResult {
  int status = 0;  // 0 when the connection failed
  std::string body;
};
// GET http://HOST:PORT/path.
HttpResult HttpGet(const std::string& address, const std::string& path);

struct PromtoolResult {
  int exit_code = -1;
  std::string output;
};
// Pipes `text` into `promtool check metrics`.
PromtoolResult PromtoolCheckMetrics(const std::string& text);

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_INTEGRATION_METRICS_TRAFFIC_H_
