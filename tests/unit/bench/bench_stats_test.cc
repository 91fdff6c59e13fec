// Statistics of `splitspec bench`: percentiles and the vLLM bench_serving metric definitions.
#include "tools/bench_stats.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::tools::bench {
namespace {

TEST(PercentileTest, InterpolatesLinearlyBetweenClosestRanks) {
  // numpy.percentile([1, 2, 3, 4], q): rank = q/100 * (n - 1).
  const std::vector<double> v = {4, 1, 3, 2};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_NEAR(Percentile(v, 99), 3.97, 1e-12);  // rank 2.97
  EXPECT_NEAR(Percentile(v, 25), 1.75, 1e-12);  // rank 0.75
}

TEST(PercentileTest, MedianOfOddCountIsTheMiddleValue) {
  EXPECT_DOUBLE_EQ(Percentile({10, 30, 20, 50, 40}, 50), 30.0);
}

TEST(PercentileTest, SingleValueAndEmptyInput) {
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7.0);
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
}

TEST(SummarizeTest, EmptyInputGivesZeros) {
  const Distribution d = Summarize({});
  EXPECT_EQ(d.count, 0);
  EXPECT_EQ(d.mean, 0);
  EXPECT_EQ(d.p99, 0);
}

TEST(SummarizeTest, MeanMedianAndTail) {
  std::vector<double> v;
  for (int i = 1; i <= 101; ++i) v.push_back(i);  // 1..101
  const Distribution d = Summarize(v);
  EXPECT_EQ(d.count, 101);
  EXPECT_DOUBLE_EQ(d.mean, 51.0);
  EXPECT_DOUBLE_EQ(d.median, 51.0);
  EXPECT_DOUBLE_EQ(d.p90, 91.0);  // rank 90 of 0..100
  EXPECT_DOUBLE_EQ(d.p99, 100.0);
}

RequestRecord Record(double send, double ttft, std::vector<double> itl, double e2e,
                     int64_t tokens) {
  RequestRecord r;
  r.ok = true;
  r.send_s = send;
  r.scheduled_s = send;
  r.ttft_s = ttft;
  r.itl_s = std::move(itl);
  r.e2e_s = e2e;
  r.output_tokens = tokens;
  return r;
}

TEST(TpotTest, ExcludesTheFirstToken) {
  // 11 tokens, first after 0.5 s, done at 2.5 s: the other 10 took 2 s.
  const RequestRecord r = Record(0, 0.5, {}, 2.5, 11);
  ASSERT_TRUE(Tpot(r).has_value());
  EXPECT_DOUBLE_EQ(*Tpot(r), 0.2);
}

TEST(TpotTest, UndefinedForOneTokenOrFailure) {
  EXPECT_FALSE(Tpot(Record(0, 0.5, {}, 0.5, 1)).has_value());
  RequestRecord failed = Record(0, 0.5, {}, 2.5, 11);
  failed.ok = false;
  EXPECT_FALSE(Tpot(failed).has_value());
}

TEST(SummarizeRunTest, ItlPoolsEveryGapWhileTpotAveragesRequests) {
  // Request A: 3 tokens in 3 messages (gaps 0.1, 0.1). Request B: 9 tokens in 2 messages (one
  // speculative step delivered 8 tokens after 0.4 s).
  std::vector<RequestRecord> records = {Record(0.0, 0.2, {0.1, 0.1}, 0.4, 3),
                                        Record(1.0, 0.3, {0.4}, 0.7, 9)};
  const RunSummary s = SummarizeRun(records);
  // ITL: mean over the three gaps, not the mean of per-request means (0.1 + 0.4) / 2.
  EXPECT_EQ(s.itl_s.count, 3);
  EXPECT_NEAR(s.itl_s.mean, 0.2, 1e-12);
  // TPOT: A (0.4-0.2)/2 = 0.1, B (0.7-0.3)/8 = 0.05; mean over requests.
  EXPECT_EQ(s.tpot_s.count, 2);
  EXPECT_NEAR(s.tpot_s.mean, 0.075, 1e-12);
  EXPECT_NEAR(s.ttft_s.mean, 0.25, 1e-12);
  EXPECT_NEAR(s.e2e_s.mean, 0.55, 1e-12);
  // Duration: run start (0) to the last completion (1.0 + 0.7).
  EXPECT_NEAR(s.duration_s, 1.7, 1e-12);
  EXPECT_NEAR(s.request_throughput, 2 / 1.7, 1e-12);
  EXPECT_NEAR(s.output_throughput, 12 / 1.7, 1e-12);
  EXPECT_EQ(s.output_tokens, 12);
}

TEST(SummarizeRunTest, FailedRequestsCountButDoNotEnterLatencies) {
  std::vector<RequestRecord> records = {Record(0.0, 0.2, {0.1}, 0.3, 2),
                                        Record(0.5, 0, {}, 5.0, 0)};
  records[1].ok = false;
  records[1].error = "deadline";
  const RunSummary s = SummarizeRun(records);
  EXPECT_EQ(s.sent, 2);
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.e2e_s.count, 1);
  EXPECT_NEAR(s.e2e_s.mean, 0.3, 1e-12);
  EXPECT_EQ(s.output_tokens, 2);
  // The failed request still ran until 5.5 s: the run lasted that long.
  EXPECT_NEAR(s.duration_s, 5.5, 1e-12);
}

TEST(SummarizeRunTest, AcceptLengthIsTokensPerVerifyStep) {
  std::vector<RequestRecord> records = {Record(0, 0.1, {}, 1, 10), Record(0, 0.1, {}, 1, 10)};
  records[0].steps = 4;
  records[0].drafted_tokens = 12;
  records[0].accepted_tokens = 6;
  records[1].steps = 6;
  records[1].drafted_tokens = 18;
  records[1].accepted_tokens = 3;
  const RunSummary s = SummarizeRun(records);
  EXPECT_EQ(s.steps, 10);
  EXPECT_NEAR(s.mean_accept_length, 1.9, 1e-12);  // 1 + 9 / 10
  EXPECT_NEAR(s.acceptance_rate, 0.3, 1e-12);     // 9 / 30
}

TEST(SummarizeRunTest, NoSpeculationAndNoRequests) {
  const RunSummary none = SummarizeRun({});
  EXPECT_EQ(none.sent, 0);
  EXPECT_EQ(none.duration_s, 0);
  EXPECT_EQ(none.request_throughput, 0);
  std::vector<RequestRecord> records = {Record(0, 0.1, {}, 1, 5)};
  records[0].steps = 4;
  const RunSummary plain = SummarizeRun(records);
  EXPECT_DOUBLE_EQ(plain.mean_accept_length, 1.0);
  EXPECT_DOUBLE_EQ(plain.acceptance_rate, 0.0);
}

TEST(SummarizeRunTest, SendLagIsTheWorstDelayBehindTheSchedule) {
  std::vector<RequestRecord> records = {Record(0.5, 0.1, {}, 1, 5), Record(2.0, 0.1, {}, 1, 5)};
  records[0].scheduled_s = 0.4;
  records[1].scheduled_s = 1.25;
  EXPECT_NEAR(SummarizeRun(records).max_send_lag_s, 0.75, 1e-12);
}

}  // namespace
}  // namespace splitspec::tools::bench
