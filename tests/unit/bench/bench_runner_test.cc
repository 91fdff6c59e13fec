// The load runner and router client of `splitspec bench` against an in-process fake router:
// requests carry the workload's settings, streams are timed message by message, the open and
// closed loops send what they should, and a router that never answers cannot hold a run past
// its drain deadline.
#include "tools/bench_runner.h"

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "splitspec/v1/router.grpc.pb.h"

namespace splitspec::tools::bench {
namespace {

constexpr int kChunk = 3;  // tokens per streamed message

// Streams max_tokens tokens in messages of kChunk, then a final message with usage: one verify
// step per message, two drafted tokens per step, the rest of each message counted as accepted.
// A prompt "hang" blocks until Release() (to test the client's deadline).
class FakeRouter final : public v1::Router::Service {
 public:
  grpc::Status Generate(grpc::ServerContext*, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(*request);
    }
    if (request->text() == "hang") {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return released_; });
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "released");
    }
    int sent = 0, steps = 0;
    while (sent < request->max_tokens()) {
      v1::GenerateResponse chunk;
      for (int i = 0; i < kChunk && sent < request->max_tokens(); ++i, ++sent)
        chunk.add_token_ids(100 + sent);
      chunk.set_text("x");
      writer->Write(chunk);
      ++steps;
    }
    v1::GenerateResponse last;
    last.set_finish_reason(v1::FINISH_REASON_LENGTH);
    last.mutable_usage()->set_prompt_tokens(static_cast<int32_t>(request->text().size()));
    last.mutable_usage()->set_completion_tokens(sent);
    last.mutable_usage()->set_steps(steps);
    last.mutable_usage()->set_drafted_tokens(2 * steps);
    last.mutable_usage()->set_accepted_tokens(sent - steps);
    writer->Write(last);
    return grpc::Status::OK;
  }

  grpc::Status GetServerInfo(grpc::ServerContext*, const v1::GetServerInfoRequest*,
                             v1::ServerInfo* info) override {
    info->set_policy("fake");
    return grpc::Status::OK;
  }

  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

  std::vector<v1::GenerateRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;                      // guarded by mu_
  std::vector<v1::GenerateRequest> requests_;  // guarded by mu_
};

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    client_ = std::make_unique<RouterClient>("127.0.0.1:" + std::to_string(port));
  }
  void TearDown() override {
    fake_.Release();
    server_->Shutdown();
  }

  static std::vector<WorkloadItem> Items() {
    std::vector<WorkloadItem> items(3);
    items[0] = {"a", "first prompt", 7, "chat", ""};
    items[1] = {"b", "second", 0, "code", ""};  // takes the default max_tokens
    items[2] = {"c", "third one", 1, "qa", ""};
    return items;
  }

  FakeRouter fake_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<RouterClient> client_;
};

TEST_F(RunnerTest, MakeRequestCarriesItemAndOptions) {
  LoadOptions options;
  options.default_max_tokens = 11;
  options.ignore_eos = true;
  options.drafter = "ngram";
  const v1::GenerateRequest a = MakeRequest(Items()[0], options);
  EXPECT_EQ(a.text(), "first prompt");
  EXPECT_EQ(a.max_tokens(), 7);
  EXPECT_TRUE(a.ignore_eos());
  EXPECT_EQ(a.drafter(), "ngram");
  EXPECT_FALSE(a.has_sampling());  // greedy
  EXPECT_EQ(MakeRequest(Items()[1], options).max_tokens(), 11);
}

// Sampled: every request carries the temperature and top-k, and a seed of its own that the
// same bench seed and item give again, so two runs (or two policies) draw alike.
TEST_F(RunnerTest, SampledRequestsCarryASeedOfTheirOwn) {
  LoadOptions options;
  options.temperature = 0.8f;
  options.top_k = 40;
  options.seed = 3;
  const std::vector<WorkloadItem> items = Items();
  const v1::GenerateRequest a = MakeRequest(items[0], options);
  ASSERT_TRUE(a.has_sampling());
  EXPECT_FLOAT_EQ(a.sampling().temperature(), 0.8f);
  EXPECT_EQ(a.sampling().top_k(), 40);
  ASSERT_TRUE(a.sampling().has_seed());
  EXPECT_EQ(a.sampling().seed(), MakeRequest(items[0], options).sampling().seed());
  EXPECT_NE(a.sampling().seed(), MakeRequest(items[1], options).sampling().seed());
  LoadOptions other_seed = options;
  other_seed.seed = 4;
  EXPECT_NE(a.sampling().seed(), MakeRequest(items[0], other_seed).sampling().seed());
}

TEST_F(RunnerTest, ClientTimesEveryMessageAndReadsUsage) {
  const auto start = std::chrono::steady_clock::now();
  LoadOptions options;
  const RequestRecord r =
      client_->Generate(MakeRequest(Items()[0], options), start, start + std::chrono::seconds(30));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.output_tokens, 7);
  EXPECT_EQ(r.itl_s.size(), 2u);  // messages of 3, 3, 1 tokens: two gaps
  EXPECT_EQ(r.steps, 3);
  EXPECT_EQ(r.drafted_tokens, 6);
  EXPECT_EQ(r.accepted_tokens, 4);
  EXPECT_EQ(r.prompt_tokens, 12);
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_GE(r.send_s, 0.0);
  EXPECT_GT(r.ttft_s, 0.0);
  EXPECT_LE(r.ttft_s, r.e2e_s);
  for (double gap : r.itl_s) EXPECT_GE(gap, 0.0);
}

TEST_F(RunnerTest, OpenLoopSendsTheScheduleInWorkloadOrder) {
  LoadOptions options;
  options.rate = std::numeric_limits<double>::infinity();  // all at once, capped below
  options.max_requests = 10;
  options.duration_s = 30;
  options.max_inflight = 4;
  options.default_max_tokens = 5;
  options.progress = false;
  const LoadResult result = RunLoad(client_.get(), Items(), options);
  EXPECT_EQ(result.dropped, 0);
  const std::vector<RequestRecord>& records = result.records;
  ASSERT_EQ(records.size(), 10u);
  std::map<std::string, int> per_item;
  for (const RequestRecord& r : records) {
    EXPECT_TRUE(r.ok) << r.error;
    ++per_item[r.item_id];
    const int want = r.item_id == "a" ? 7 : (r.item_id == "b" ? 5 : 1);
    EXPECT_EQ(r.output_tokens, want) << r.item_id;
    EXPECT_EQ(r.scheduled_s, 0.0);
    EXPECT_GE(r.send_s, r.scheduled_s);
  }
  // Items 0..9 cycle a, b, c: a four times, b and c three times each.
  EXPECT_EQ(per_item["a"], 4);
  EXPECT_EQ(per_item["b"], 3);
  EXPECT_EQ(per_item["c"], 3);
  EXPECT_EQ(fake_.requests().size(), 10u);
  const RunSummary s = SummarizeRun(records);
  EXPECT_EQ(s.completed, 10);
  EXPECT_EQ(s.output_tokens, 4 * 7 + 3 * 5 + 3 * 1);
}

TEST_F(RunnerTest, ClosedLoopKeepsClientsBusyUntilTheWindowCloses) {
  LoadOptions options;
  options.concurrency = 2;
  options.duration_s = 0.5;
  options.default_max_tokens = 4;
  options.progress = false;
  const LoadResult result = RunLoad(client_.get(), Items(), options);
  EXPECT_EQ(result.dropped, 0);
  const std::vector<RequestRecord>& records = result.records;
  ASSERT_GE(records.size(), 1u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_TRUE(records[i].ok) << records[i].error;
    EXPECT_LT(records[i].scheduled_s, options.duration_s);  // nothing due after the window
    EXPECT_GE(records[i].send_s, records[i].scheduled_s);
    if (i > 0) {
      EXPECT_GE(records[i].send_s, records[i - 1].send_s);  // sorted by send time
    }
  }
  EXPECT_EQ(fake_.requests().size(), records.size());
}

TEST_F(RunnerTest, AHungRouterCannotHoldTheRunPastItsDeadline) {
  std::vector<WorkloadItem> items(1);
  items[0] = {"h", "hang", 4, "", ""};
  LoadOptions options;
  options.rate = std::numeric_limits<double>::infinity();
  options.max_requests = 2;
  options.duration_s = 0.2;
  options.drain_s = 0.3;
  options.progress = false;
  const LoadResult result = RunLoad(client_.get(), items, options);
  const std::vector<RequestRecord>& records = result.records;
  ASSERT_EQ(records.size(), 2u);
  for (const RequestRecord& r : records) {
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("code 4"), std::string::npos) << r.error;  // DEADLINE_EXCEEDED
    EXPECT_EQ(r.output_tokens, 0);
  }
  const RunSummary s = SummarizeRun(records);
  EXPECT_EQ(s.failed, 2);
  EXPECT_EQ(s.ttft_s.count, 0);
}

TEST_F(RunnerTest, ArrivalsThatFindEveryClientBusyUntilTheWindowClosesAreDropped) {
  // One client thread, three arrivals at t = 0: the first hangs past the window, so the other
  // two are never sent and are counted as dropped rather than silently missing.
  std::vector<WorkloadItem> items(1);
  items[0] = {"h", "hang", 4, "", ""};
  LoadOptions options;
  options.rate = std::numeric_limits<double>::infinity();
  options.max_requests = 3;
  options.max_inflight = 1;
  options.duration_s = 1.0;
  options.drain_s = 0.2;
  options.progress = false;
  const LoadResult result = RunLoad(client_.get(), items, options);
  EXPECT_EQ(result.records.size(), 1u);
  EXPECT_EQ(result.dropped, 2);
  EXPECT_EQ(fake_.requests().size(), 1u);
}

}  // namespace
}  // namespace splitspec::tools::bench
