// RouterSpecMetrics: counter and histogram values after scripted steps.
#include "common/metrics/router_spec_metrics.h"

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/metrics/registry_exposition.h"

namespace splitspec::metrics {
namespace {

using testing::Bucket;
using testing::Exposition;
using testing::Parse;
using testing::ParseExposition;

std::unique_ptr<RouterSpecMetrics> MakeSpec(MetricsRegistry& registry, const std::string& pool,
                                            const std::string& policy, int max_k) {
  RouterSpecMetricsOptions options;
  options.pool = pool;
  options.policy = policy;
  options.max_k = max_k;
  auto spec = RouterSpecMetrics::Create(registry, options);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *std::move(spec) : nullptr;
}

// Two steps and one single proposal with accept lengths worked out by hand:
//   step 1: (k=4, a=4) (4, 2) (0, 0: plain decode) (3, 0)
//   step 2: (4, 1) (2, 2)
//   single: (4, 3)
// Drafts (k > 0): 6; draft tokens 4+4+3+4+2+4 = 21; accepted 4+2+0+1+2+3 = 12.
// Position p counts drafts with a > p: p0: 5, p1: 4, p2: 2, p3: 1.
// Accept lengths a+1: 5 3 1 2 3 4 -> le1:1 le2:2 le3:4 le4:5 le5:6, sum 18.
// Proposal lengths k: 4 4 0 3 4 2 4 -> le0:1 le1:1 le2:2 le3:3 le4:7, sum 21.
// Trees: counted among the drafts and on their own; the per-step histogram sums every
// request's verified nodes (8 + 3 + 0 = 11, then 16).
TEST(RouterSpecMetricsTest, TreesAreCountedAndStepNodesSummed) {
  MetricsRegistry registry;
  auto spec = MakeSpec(registry, "draft-model", "smartspec", 4);
  ASSERT_NE(spec, nullptr);
  spec->RecordStep({{8, 2, true}, {3, 1, false}, {0, 0, false}});
  spec->RecordStep({{16, 4, true}});
  const std::map<std::string, std::string> l = {{"pool", "draft-model"}, {"policy", "smartspec"}};
  Exposition e = Parse(registry);
  EXPECT_EQ(e.Value("splitspec_spec_decode_num_drafts_total", l), 3.0);
  EXPECT_EQ(e.Value("splitspec_spec_decode_num_tree_drafts_total", l), 2.0);
  EXPECT_EQ(e.Value("splitspec_spec_decode_step_draft_tokens_count", l), 2.0);
  EXPECT_EQ(e.Value("splitspec_spec_decode_step_draft_tokens_sum", l), 27.0);
  EXPECT_EQ(spec->Snapshot().num_tree_drafts, 2.0);
}

TEST(RouterSpecMetricsTest, ScriptedStepsGiveHandWorkedCounts) {
  MetricsRegistry registry;
  auto spec = MakeSpec(registry, "draft-model", "static", 4);
  ASSERT_NE(spec, nullptr);
  spec->RecordStep({{4, 4}, {4, 2}, {0, 0}, {3, 0}});
  spec->RecordStep({{4, 1}, {2, 2}});
  spec->RecordProposal(4, 3);

  const std::map<std::string, std::string> l = {{"pool", "draft-model"}, {"policy", "static"}};
  Exposition e = Parse(registry);
  EXPECT_EQ(e.Value("splitspec_spec_decode_num_drafts_total", l), 6.0);
  EXPECT_EQ(e.Value("splitspec_spec_decode_num_draft_tokens_total", l), 21.0);
  EXPECT_EQ(e.Value("splitspec_spec_decode_num_accepted_tokens_total", l), 12.0);
  const double per_pos[] = {5, 4, 2, 1};
  for (int p = 0; p < 4; ++p) {
    auto labels = l;
    labels["position"] = std::to_string(p);
    EXPECT_EQ(e.Value("splitspec_spec_decode_num_accepted_tokens_per_pos_total", labels),
              per_pos[p])
        << "position " << p;
  }
  EXPECT_TRUE(e.Find("splitspec_spec_decode_num_accepted_tokens_per_pos_total", {{"position", "4"}})
                  .empty());

  const std::string accept = "splitspec_spec_decode_accept_length";
  const double accept_cum[] = {1, 2, 4, 5, 6};
  for (int le = 1; le <= 5; ++le) {
    EXPECT_EQ(Bucket(e, accept, l, std::to_string(le)), accept_cum[le - 1]) << "le " << le;
  }
  EXPECT_EQ(Bucket(e, accept, l, "+Inf"), 6.0);
  EXPECT_EQ(e.Value(accept + "_sum", l), 18.0);
  EXPECT_EQ(e.Value(accept + "_count", l), 6.0);

  const std::string proposal = "splitspec_spec_decode_proposal_length";
  const double proposal_cum[] = {1, 1, 2, 3, 7};
  for (int le = 0; le <= 4; ++le) {
    EXPECT_EQ(Bucket(e, proposal, l, std::to_string(le)), proposal_cum[le]) << "le " << le;
  }
  EXPECT_EQ(Bucket(e, proposal, l, "+Inf"), 7.0);
  EXPECT_EQ(e.Value(proposal + "_sum", l), 21.0);
  EXPECT_EQ(e.Value(proposal + "_count", l), 7.0);

  // Gauges follow the last RecordStep: mean k of (4, 2) = 3; untiered, so the tier is mean k.
  EXPECT_EQ(e.Value("splitspec_spec_mean_proposal_length", l), 3.0);
  EXPECT_EQ(e.Value("splitspec_spec_active_tier", l), 3.0);

  SpecSnapshot snap = spec->Snapshot();
  EXPECT_EQ(snap.num_drafts, 6.0);
  EXPECT_EQ(snap.num_accepted_tokens, 12.0);
  EXPECT_EQ(snap.accepted_per_position, (std::vector<double>{5, 4, 2, 1}));
  EXPECT_DOUBLE_EQ(snap.AvgAcceptLength(), 3.0);  // 1 + 12 / 6
  EXPECT_DOUBLE_EQ(snap.AcceptanceRate(), 12.0 / 21.0);
}

TEST(RouterSpecMetricsTest, OutOfRangeOutcomesAreClampedNotFatal) {
  MetricsRegistry registry;
  auto spec = MakeSpec(registry, "p", "q", 2);
  ASSERT_NE(spec, nullptr);
  // accepted > proposed -> proposed; negative k -> plain decode; a tree deeper than max_k
  // (k = 5, a = 5) counts positions 0..1 and lands in the +Inf buckets.
  spec->RecordStep({{2, 7}, {-3, 1}, {5, 5}, {1, -4}});
  const SpecSnapshot s = spec->Snapshot();
  EXPECT_EQ(s.num_drafts, 3.0);           // (2,7) (5,5) (1,-4)
  EXPECT_EQ(s.num_draft_tokens, 8.0);     // 2 + 5 + 1
  EXPECT_EQ(s.num_accepted_tokens, 7.0);  // 2 + 5 + 0
  EXPECT_EQ(s.accepted_per_position, (std::vector<double>{2, 2}));
  Exposition e = Parse(registry);
  const std::map<std::string, std::string> l = {{"pool", "p"}};
  EXPECT_EQ(Bucket(e, "splitspec_spec_decode_accept_length", l, "3"), 2.0);  // 1 and 3
  EXPECT_EQ(Bucket(e, "splitspec_spec_decode_accept_length", l, "+Inf"), 3.0);
  EXPECT_EQ(Bucket(e, "splitspec_spec_decode_proposal_length", l, "0"), 1.0);
  EXPECT_EQ(Bucket(e, "splitspec_spec_decode_proposal_length", l, "2"), 3.0);
  EXPECT_EQ(Bucket(e, "splitspec_spec_decode_proposal_length", l, "+Inf"), 4.0);
}

// The batched path must agree with one call per request, for random batches that include
// plain decodes, full accepts and proposals beyond max_k.
TEST(RouterSpecMetricsTest, RecordStepMatchesPerRequestRecording) {
  MetricsRegistry batched_registry;
  MetricsRegistry single_registry;
  auto batched = MakeSpec(batched_registry, "p", "q", 5);
  auto single = MakeSpec(single_registry, "p", "q", 5);
  ASSERT_TRUE(batched && single);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> k_dist(0, 7);
  for (int step = 0; step < 50; ++step) {
    std::vector<ProposalOutcome> batch(1 + step % 9);
    for (auto& o : batch) {
      o.proposed = k_dist(rng);
      o.accepted = o.proposed == 0 ? 0 : std::uniform_int_distribution<int>(0, o.proposed)(rng);
      single->RecordProposal(o.proposed, o.accepted);
    }
    batched->RecordStep(batch);
  }
  Exposition a = Parse(batched_registry);
  Exposition b = Parse(single_registry);
  size_t compared = 0;
  for (const auto& s : a.samples) {
    if (s.name.find("_total") == std::string::npos &&
        s.name.find("splitspec_spec_decode_") == std::string::npos) {
      continue;  // gauges differ by design: RecordProposal leaves them alone
    }
    if (s.name.find("step_draft_tokens") != std::string::npos) continue;  // per step by design
    std::map<std::string, std::string> labels(s.labels.begin(), s.labels.end());
    EXPECT_EQ(b.Value(s.name, labels), s.value) << s.name;
    ++compared;
  }
  // 4 counters (trees: none here) + 5 positions + 2 histograms x (7 buckets + sum + count).
  EXPECT_EQ(compared, 4u + 5u + 2u * 9u);
}

TEST(RouterSpecMetricsTest, PoolsShareFamiliesWithSeparateSeries) {
  MetricsRegistry registry;
  auto a = MakeSpec(registry, "draft-model", "smartspec", 3);
  auto b = MakeSpec(registry, "ngram", "fsm", 3);
  ASSERT_TRUE(a && b);
  a->RecordStep({{3, 3}});
  b->RecordStep({{2, 0}, {1, 1}});
  Exposition e = Parse(registry);
  EXPECT_EQ(e.Value("splitspec_spec_decode_num_accepted_tokens_total", {{"pool", "draft-model"}}),
            3.0);
  EXPECT_EQ(e.Value("splitspec_spec_decode_num_accepted_tokens_total", {{"pool", "ngram"}}), 1.0);
  EXPECT_EQ(e.Value("splitspec_spec_decode_num_drafts_total", {{"policy", "fsm"}}), 2.0);
}

TEST(RouterSpecMetricsTest, ExplicitTierIsNotOverwrittenByMeanK) {
  MetricsRegistry registry;
  auto spec = MakeSpec(registry, "p", "sglang_tiers", 7);
  ASSERT_NE(spec, nullptr);
  spec->RecordStep({{1, 1}, {3, 0}});
  EXPECT_EQ(spec->Snapshot().active_tier, 2.0);  // mean k before any tier is set
  spec->SetActiveTier(7);
  spec->RecordStep({{7, 2}, {7, 7}, {1, 0}});
  EXPECT_EQ(spec->Snapshot().active_tier, 7.0);
  EXPECT_EQ(spec->Snapshot().mean_proposal_length, 5.0);
  spec->SetGoodput(900, 850);
  EXPECT_EQ(spec->Snapshot().goodput_estimated_tokens_per_second, 900.0);
  EXPECT_EQ(spec->Snapshot().goodput_observed_tokens_per_second, 850.0);
}

TEST(RouterSpecMetricsTest, EmptyStepChangesNothing) {
  MetricsRegistry registry;
  auto spec = MakeSpec(registry, "p", "q", 3);
  ASSERT_NE(spec, nullptr);
  spec->RecordStep({{2, 1}});
  const std::string before = registry.Serialize();
  spec->RecordStep({});
  EXPECT_EQ(registry.Serialize(), before);
}

// Steps recorded from several threads at once (the thread-local scratch of RecordStep must not be
// shared) add up exactly.
TEST(RouterSpecMetricsTest, ConcurrentStepsAddUp) {
  MetricsRegistry registry;
  auto spec = MakeSpec(registry, "p", "q", 4);
  ASSERT_NE(spec, nullptr);
  // Per step: 3 drafts, 9 draft tokens, 5 accepted; positions (a > p): 3, 2, 0, 0.
  const std::vector<ProposalOutcome> batch = {{4, 2}, {2, 2}, {3, 1}, {0, 0}};
  constexpr int kThreads = 4;
  constexpr int kSteps = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kSteps; ++i) spec->RecordStep(batch);
    });
  }
  for (auto& t : threads) t.join();
  const SpecSnapshot s = spec->Snapshot();
  const double steps = kThreads * kSteps;
  EXPECT_EQ(s.num_drafts, 3 * steps);
  EXPECT_EQ(s.num_draft_tokens, 9 * steps);
  EXPECT_EQ(s.num_accepted_tokens, 5 * steps);
  EXPECT_EQ(s.accepted_per_position, (std::vector<double>{3 * steps, 2 * steps, 0, 0}));
  Exposition e = Parse(registry);
  EXPECT_EQ(e.Value("splitspec_spec_decode_accept_length_count"), 3 * steps);
  EXPECT_EQ(e.Value("splitspec_spec_decode_proposal_length_count"), 4 * steps);
}

TEST(RouterSpecMetricsTest, CreateRejectsBadOptions) {
  MetricsRegistry registry;
  RouterSpecMetricsOptions options;
  options.max_k = 0;
  EXPECT_EQ(RouterSpecMetrics::Create(registry, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.max_k = RouterSpecMetrics::kMaxK + 1;
  EXPECT_FALSE(RouterSpecMetrics::Create(registry, options).ok());
  options.max_k = 4;
  options.pool = "";
  EXPECT_FALSE(RouterSpecMetrics::Create(registry, options).ok());
  options.pool = "ok";
  EXPECT_TRUE(RouterSpecMetrics::Create(registry, options).ok());
}

}  // namespace
}  // namespace splitspec::metrics
