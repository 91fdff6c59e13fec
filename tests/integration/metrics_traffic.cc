// Traffic, HTTP and promtool helpers for the metrics integration tests (see metrics_traffic.h).
#include "tests/integration/metrics_traffic.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/rpc/worker_clients.h"
#include "httplib.h"

namespace splitspec::testing {

RequestResult RunRequest(const std::string& router, const RequestSpec& spec) {
  auto stub = v1::Router::NewStub(rpc::MakeChannel(router));
  v1::GenerateRequest request;
  request.mutable_tokens()->mutable_ids()->Add(spec.prompt.begin(), spec.prompt.end());
  request.set_max_tokens(spec.max_tokens);
  request.set_ignore_eos(true);
  request.set_drafter(spec.pool);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  RequestResult result;
  auto reader = stub->Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    result.streamed_tokens += response.token_ids_size();
    if (response.has_usage()) result.usage = response.usage();
  }
  result.status = reader->Finish();
  return result;
}

std::vector<RequestSpec> MixedRequests(int n, int max_tokens) {
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 30, 31, 32, 33, 30, 31, 32, 33, 30, 31, 32, 33, 30, 31},
      {1, 17, 42, 99, 5, 300, 12, 480, 77},
      {1, 7, 8, 9, 7, 8, 9, 7, 8, 9, 7, 8},
      {1, 200, 201, 200, 201, 200, 201},
  };
  const char* pools[] = {"ngram", "model", "ngram", ""};
  std::vector<RequestSpec> out;
  for (int i = 0; i < n; ++i) {
    RequestSpec spec;
    spec.prompt = prompts[i % prompts.size()];
    spec.prompt.push_back(100 + i % 50);  // distinct prompts, so no two requests are identical
    spec.max_tokens = max_tokens - i % 3 * 4;
    spec.pool = pools[i % 4];
    out.push_back(std::move(spec));
  }
  return out;
}

Traffic::Traffic(std::string router, std::vector<RequestSpec> mix, int n_threads, int max_requests)
    : router_(std::move(router)), mix_(std::move(mix)), max_requests_(max_requests) {
  for (int i = 0; i < n_threads; ++i) threads_.emplace_back([this] { Run(); });
}

Traffic::~Traffic() { Stop(); }

void Traffic::Run() {
  while (!stop_.load()) {
    const int i = next_.fetch_add(1);
    if (i >= max_requests_) return;
    RequestResult result = RunRequest(router_, mix_[i % mix_.size()]);
    std::lock_guard<std::mutex> lock(mu_);
    results_.push_back(std::move(result));
  }
}

void Traffic::Stop() {
  stop_.store(true);
  Join();
}

void Traffic::Join() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

std::vector<RequestResult> Traffic::Results() {
  std::lock_guard<std::mutex> lock(mu_);
  return results_;
}

int Traffic::Completed() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(results_.size());
}

HttpResult HttpGet(const std::string& address, const std::string& path) {
  const size_t colon = address.rfind(':');
  httplib::Client client(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  HttpResult out;
  auto res = client.Get(path.c_str());
  if (!res) return out;
  out.status = res->status;
  out.body = res->body;
  return out;
}

PromtoolResult PromtoolCheckMetrics(const std::string& text) {
  char path[] = "/tmp/splitspec_promtool_XXXXXX";
  const int fd = mkstemp(path);
  PromtoolResult result;
  if (fd < 0) return result;
  close(fd);
  const std::string command = std::string("promtool check metrics > '") + path + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "w");
  if (pipe == nullptr) return result;
  fwrite(text.data(), 1, text.size(), pipe);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  result.output = buffer.str();
  unlink(path);
  return result;
}

}  // namespace splitspec::testing
