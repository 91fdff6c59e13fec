// Latency model: JSON round trip, validation, least-squares fit, online correction.
#include "router/latency_model.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/scoped_temp_dir.h"

namespace splitspec::router {
namespace {

TEST(LatencyModelTest, JsonRoundTrip) {
  LatencyModel m;
  m.set_description("test");
  m.set_target({1.5e-7, 3e-4, 0.02});
  m.set_drafter("small", DrafterCost{false, {1e-8, 1e-5, 0.004}, 0});
  m.set_drafter("lookup", DrafterCost{true, {}, 0.0007});
  m.set_rpc_seconds(0.0004);
  const splitspec::testing::ScopedTempDir dir("latency_model_");
  const std::string path = dir.path() + "/latency_roundtrip.json";
  ASSERT_TRUE(m.Save(path).ok());
  auto loaded = LatencyModel::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->ToJson(), m.ToJson());
  EXPECT_DOUBLE_EQ(loaded->TargetSeconds(1000, 10), 1.5e-7 * 1000 + 3e-4 * 10 + 0.02);
  EXPECT_TRUE(loaded->EffectiveDrafter("lookup").model_free);
  EXPECT_DOUBLE_EQ(loaded->EffectiveDrafter("lookup").constant_seconds, 0.0007);
  // Unknown pools fall back to "default" (the built-in one here) or else the first entry.
  EXPECT_DOUBLE_EQ(loaded->EffectiveDrafter("other").forward.delta,
                   loaded->EffectiveDrafter("default").forward.delta);
  auto only = LatencyModel::FromJson(
      {{"target", {{"alpha", 0}, {"gamma", 0}, {"delta", 0.01}}},
       {"drafters", {{"lookup", {{"kind", "model_free"}, {"constant_seconds", 0.0007}}}}}});
  ASSERT_TRUE(only.ok());
  EXPECT_DOUBLE_EQ(only->EffectiveDrafter("other").constant_seconds, 0.0007);
  std::remove(path.c_str());
}

TEST(LatencyModelTest, RejectsMalformedJson) {
  EXPECT_FALSE(LatencyModel::FromJson(nlohmann::json::array()).ok());
  EXPECT_FALSE(LatencyModel::FromJson({{"drafters", nlohmann::json::object()}}).ok());
  EXPECT_FALSE(LatencyModel::FromJson({{"target", {{"alpha", 1}, {"gamma", 1}}}}).ok());
  EXPECT_FALSE(
      LatencyModel::FromJson({{"target", {{"alpha", -1}, {"gamma", 1}, {"delta", 1}}}}).ok());
  EXPECT_FALSE(LatencyModel::FromJson({{"target", {{"alpha", 0}, {"gamma", 0}, {"delta", 0}}},
                                       {"drafters", {{"x", {{"kind", "magic"}}}}}})
                   .ok());
  EXPECT_EQ(LatencyModel::Load("/nonexistent/latency.json").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(LatencyModelTest, ShippedDefaultLoads) {
  auto m = LatencyModel::Load(std::string(SPLITSPEC_SOURCE_DIR) +
                              "/configs/latency/a100-7b-160m.json");
  ASSERT_TRUE(m.ok()) << m.status();
  // The built-in default is the same model.
  EXPECT_EQ(m->ToJson()["target"], LatencyModel().ToJson()["target"]);
  EXPECT_EQ(m->ToJson()["drafters"], LatencyModel().ToJson()["drafters"]);
}

// Every latency file the repository ships (the router's --latency-model, the Kubernetes
// ConfigMap) loads, prices a step, and survives a save and load unchanged.
TEST(LatencyModelTest, EveryShippedLatencyFileLoads) {
  const std::filesystem::path dir = std::filesystem::path(SPLITSPEC_SOURCE_DIR) / "configs" / "latency";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    auto m = LatencyModel::Load(entry.path().string());
    ASSERT_TRUE(m.ok()) << entry.path() << ": " << m.status();
    EXPECT_GT(m->TargetSeconds(1000, 4), 0.0) << entry.path();
    auto again = LatencyModel::FromJson(m->ToJson());
    ASSERT_TRUE(again.ok()) << entry.path() << ": " << again.status();
    EXPECT_EQ(again->ToJson(), m->ToJson()) << entry.path();
  }
  EXPECT_GE(files, 2);
}

TEST(LatencyModelTest, DraftTimeCountsOneForwardPerDepth) {
  LatencyModel m;
  m.set_drafter("d", DrafterCost{false, {1e-6, 1e-4, 0.001}, 0});
  const std::vector<int32_t> ctx = {10, 20}, k = {3, 1};
  const double expect = (1e-6 * 30 + 1e-4 * 2 + 0.001) + (1e-6 * 11 + 1e-4 + 0.001) +
                        (1e-6 * 12 + 1e-4 + 0.001);
  EXPECT_NEAR(m.DraftSeconds("d", ctx, k), expect, 1e-15);
  EXPECT_EQ(m.DraftSeconds("d", ctx, std::vector<int32_t>{0, 0}), 0.0);
}

TEST(LatencyModelTest, FitRecoversCoefficientsAndReportsQuality) {
  const ForwardCoefficients truth = {2e-7, 1.5e-4, 0.011};
  std::vector<ForwardSample> exact, noisy;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0, 0.02);
  for (int b : {1, 2, 4, 8, 16, 32, 64}) {
    for (int ctx : {64, 256, 1024}) {
      for (int tpr : {1, 2, 4}) {
        const double n_ctx = b * ctx, n_tok = b * tpr;
        const double t = truth.Predict(n_ctx, n_tok);
        exact.push_back({n_ctx, n_tok, t});
        noisy.push_back({n_ctx, n_tok, t * (1 + noise(rng))});
      }
    }
  }
  auto fit = FitForward(exact);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->coefficients.alpha, truth.alpha, 1e-12);
  EXPECT_NEAR(fit->coefficients.gamma, truth.gamma, 1e-10);
  EXPECT_NEAR(fit->coefficients.delta, truth.delta, 1e-9);
  EXPECT_NEAR(fit->r2, 1.0, 1e-9);
  EXPECT_LT(fit->worst_relative_error, 1e-6);
  auto rough = FitForward(noisy);
  ASSERT_TRUE(rough.ok());
  EXPECT_LT(rough->r2, 1.0);
  EXPECT_GT(rough->r2, 0.9);
  EXPECT_GT(rough->worst_relative_error, 0.005);
  EXPECT_NEAR(rough->coefficients.gamma, truth.gamma, 0.1 * truth.gamma);
}

TEST(LatencyModelTest, FitRejectsDegenerateInput) {
  EXPECT_FALSE(FitForward(std::vector<ForwardSample>{{1, 1, 1}, {2, 2, 2}}).ok());
  // Context never varies independently of the batched tokens: singular.
  std::vector<ForwardSample> s;
  for (int i = 1; i < 10; ++i) s.push_back({2.0 * i, 1.0 * i, 0.1 * i});
  EXPECT_FALSE(FitForward(s).ok());
}

TEST(LatencyModelTest, OnlineCorrectionPullsAWrongFileTowardsObservations) {
  LatencyModel m;
  m.set_target({1e-7, 2e-4, 0.012});
  // The hardware is really 3x slower than the file says.
  for (int i = 0; i < 200; ++i) {
    const double n_ctx = 1000 + 10 * i, n_tok = 8 + (i % 5);
    m.ObserveTarget(n_ctx, n_tok, 3 * (1e-7 * n_ctx + 2e-4 * n_tok + 0.012));
  }
  EXPECT_NEAR(m.target_scale(), 3.0, 0.01);
  EXPECT_NEAR(m.TargetSeconds(2000, 10), 3 * (1e-7 * 2000 + 2e-4 * 10 + 0.012), 1e-4);
  // Unmeasured (0) observations carry no information.
  m.ObserveTarget(1000, 8, 0.0);
  EXPECT_NEAR(m.target_scale(), 3.0, 0.01);
  // RPC overhead follows what steps leave over.
  for (int i = 0; i < 200; ++i) m.ObserveRpcOverhead(0.001);
  EXPECT_NEAR(m.RpcSeconds(), 0.001, 1e-6);
}

// A pool that never drafted follows the target's correction (the refit's ratio to the file),
// so a refitted target does not make an unobserved drafter look dearer than it is; an
// observed pool keeps its own.
TEST(LatencyModelTest, UnobservedPoolFollowsTheTargetCorrection) {
  LatencyModel m;
  m.set_target({1e-6, 2e-4, 0.010});
  m.set_drafter("draft", DrafterCost{false, {2e-7, 3e-5, 0.002}, 0});
  EXPECT_DOUBLE_EQ(m.draft_scale("draft"), 1.0);
  m.SetRefitTarget({1e-7, 2e-5, 0.001});  // ten times faster than the file
  EXPECT_NEAR(m.TargetCorrection(), 0.1, 1e-12);
  EXPECT_NEAR(m.draft_scale("draft"), 0.1, 1e-12);
  EXPECT_NEAR(m.DraftSeconds("draft", {100}, {1}), 0.1 * (2e-7 * 100 + 3e-5 + 0.002), 1e-12);
  m.ObserveDraft("draft", {100}, {1}, 2e-7 * 100 + 3e-5 + 0.002);  // the file was right for it
  EXPECT_GT(m.draft_scale("draft"), 0.1);
}

// A Propose that fed a catch-up (more than a decode step's chain, bonus and guess a request)
// ran a prefill the line does not price: it leaves the correction where it was, while a
// steady-state call of the same depth moves it.
TEST(LatencyModelTest, CatchUpCallsDoNotMoveTheDraftCorrection) {
  LatencyModel m;
  m.set_drafter("draft", DrafterCost{false, {2e-7, 3e-5, 0.002}, 0});
  const double scale = m.draft_scale("draft");
  // Two requests drafting 3 levels: up to 2 * (3 + 2) = 10 tokens fed is a decode step.
  const double catch_up_raw = m.DraftSeconds(m.Resolve("draft"), {100, 200}, {3, 3}, 40);
  for (int i = 0; i < 20; ++i) m.ObserveDraft("draft", {100, 200}, {3, 3}, 2 * catch_up_raw, 40);
  EXPECT_DOUBLE_EQ(m.draft_scale("draft"), scale);

  const double steady_raw = m.DraftSeconds(m.Resolve("draft"), {100, 200}, {3, 3}, 10);
  for (int i = 0; i < 20; ++i) m.ObserveDraft("draft", {100, 200}, {3, 3}, 2 * steady_raw, 10);
  EXPECT_GT(m.draft_scale("draft"), 1.5 * scale);
}

// Drafts made ahead learn a correction of their own: until one is observed they are priced as
// the pool's serial Proposes; drafts made ahead seen at three times the line move only theirs,
// and serial Proposes only the serial one.
TEST(LatencyModelTest, DraftsMadeAheadHaveACorrectionOfTheirOwn) {
  LatencyModel m;
  m.set_drafter("draft", DrafterCost{false, {2e-7, 3e-5, 0.002}, 0});
  const std::vector<int32_t> ctx = {100, 200}, k = {3, 3};
  const double raw = m.DraftSeconds(m.Resolve("draft"), ctx, k, 8);
  EXPECT_DOUBLE_EQ(m.DraftSeconds(m.ResolveAhead("draft"), ctx, k, 8), raw);
  for (int i = 0; i < 40; ++i) m.ObserveDraftAhead("draft", ctx, k, 3 * raw, 8);
  EXPECT_GT(m.DraftSeconds(m.ResolveAhead("draft"), ctx, k, 8), 2.5 * raw);  // most of the way to 3x
  EXPECT_DOUBLE_EQ(m.DraftSeconds(m.Resolve("draft"), ctx, k, 8), raw);  // the serial price stays
  const double ahead_scale = m.draft_ahead_scale("draft");
  for (int i = 0; i < 40; ++i) m.ObserveDraft("draft", ctx, k, 0.5 * raw, 8);
  EXPECT_LT(m.DraftSeconds(m.Resolve("draft"), ctx, k, 8), 0.6 * raw);
  EXPECT_DOUBLE_EQ(m.draft_ahead_scale("draft"), ahead_scale);
  // A catch-up fed more than a decode step's tokens: not learnt from, as for serial calls.
  for (int i = 0; i < 40; ++i) m.ObserveDraftAhead("draft", ctx, k, 10 * raw, 40);
  EXPECT_DOUBLE_EQ(m.draft_ahead_scale("draft"), ahead_scale);
}

// Over a refit the batch-size residual prices what the line misses: a 17-token forward that
// really costs 1.4x its line is predicted at 1.4x; without a refit (the multiplicative scale
// already corrects the file) or with the residual off, predictions are the line.
TEST(LatencyModelTest, BatchResidualCorrectsTheRefitOnly) {
  const ForwardCoefficients line{0, 1e-3, 0.01};
  auto observe = [&](LatencyModel& m) {
    for (int i = 0; i < 8; ++i) {
      for (int n : {2, 4, 17}) m.ObserveTarget(100, n, line.Predict(100, n) * (n == 17 ? 1.4 : 1.0));
    }
  };
  LatencyModel no_refit;
  no_refit.set_target(line);
  observe(no_refit);
  EXPECT_TRUE(no_refit.batch_residual().Describe().empty());

  LatencyModel m;
  m.set_target(line);
  m.SetRefitTarget(line);
  observe(m);
  EXPECT_NEAR(m.TargetSeconds(100, 17), 1.4 * line.Predict(100, 17), 1e-9);
  EXPECT_NEAR(m.TargetSeconds(100, 4), line.Predict(100, 4), 1e-9);

  m.set_batch_residual(false);
  EXPECT_NEAR(m.TargetSeconds(100, 17), line.Predict(100, 17), 1e-12);
  observe(m);
  EXPECT_NEAR(m.TargetSeconds(100, 17), line.Predict(100, 17), 1e-12);
}

// A profiled batch shape (target.batch_factors): predictions are the line times the shape,
// interpolated between profiled sizes and held beyond them; it survives a save and load.
TEST(LatencyModelTest, BatchShapeMultipliesTheLineAndRoundTrips) {
  const ForwardCoefficients line{0, 1e-3, 0.005};
  LatencyModel m;
  m.set_target(line);
  m.set_target_batch_factors({{1, 1.5}, {4, 1.0}, {8, 0.9}});
  EXPECT_NEAR(m.TargetSeconds(0, 1), 1.5 * line.Predict(0, 1), 1e-12);
  EXPECT_NEAR(m.TargetSeconds(0, 8), 0.9 * line.Predict(0, 8), 1e-12);
  EXPECT_NEAR(m.TargetSeconds(0, 32), 0.9 * line.Predict(0, 32), 1e-12);  // held beyond
  const double mid = m.TargetSeconds(0, 2);  // between 1.5 and 1.0 of the line at 2
  EXPECT_GT(mid, 1.0 * line.Predict(0, 2));
  EXPECT_LT(mid, 1.5 * line.Predict(0, 2));
  auto loaded = LatencyModel::FromJson(m.ToJson());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->ToJson(), m.ToJson());
  EXPECT_DOUBLE_EQ(loaded->TargetSeconds(0, 1), m.TargetSeconds(0, 1));

  // The online corrections learn on top of the shape: a machine 20% slower everywhere moves
  // the scale to 1.2 and keeps the shape; with a refit, the line times the shape.
  for (int i = 0; i < 400; ++i) m.ObserveTarget(0, 4, 1.2 * m.TargetShape(4) * line.Predict(0, 4));
  EXPECT_NEAR(m.target_scale(), 1.2, 1e-3);
  EXPECT_NEAR(m.TargetSeconds(0, 1) / m.TargetSeconds(0, 4), 1.5 * line.Predict(0, 1) / line.Predict(0, 4), 1e-9);
  m.SetRefitTarget(line);
  m.set_batch_residual(false);
  EXPECT_NEAR(m.TargetSeconds(0, 1), 1.5 * line.Predict(0, 1), 1e-12);

  for (const nlohmann::json& bad : {nlohmann::json{{"0", 1.0}}, nlohmann::json{{"x", 1.0}}, nlohmann::json{{"2", -1.0}},
                                    nlohmann::json{{"2", "one"}}, nlohmann::json::array()}) {
    EXPECT_FALSE(LatencyModel::FromJson({{"target", {{"alpha", 0}, {"gamma", 0}, {"delta", 0.01}, {"batch_factors", bad}}}}).ok())
        << bad.dump();
  }
}

// A draft model's profiled shape (drafters.NAME.batch_factors) multiplies each draft forward's
// line at the tokens that forward feeds, the first forward's catch-up included; it survives a
// save and load, and a drafter that runs as its shape says leaves the online correction at 1.
TEST(LatencyModelTest, DrafterBatchShapeMultipliesEachForwardAndRoundTrips) {
  const ForwardCoefficients line{1e-6, 1e-4, 0.001};
  LatencyModel m;
  m.set_drafter("d", DrafterCost{false, line, 0});
  m.set_drafter_batch_factors("d", {{1, 2.0}, {4, 1.0}, {8, 0.5}});
  const std::vector<int32_t> one_ctx = {10}, one_k = {2};
  EXPECT_NEAR(m.DraftSeconds("d", one_ctx, one_k), 2.0 * (line.Predict(10, 1) + line.Predict(11, 1)), 1e-15);
  const std::vector<int32_t> four_ctx = {10, 10, 10, 10}, four_k = {1, 1, 1, 1};
  EXPECT_NEAR(m.DraftSeconds("d", four_ctx, four_k), line.Predict(40, 4), 1e-15);
  // A first forward feeding 16 tokens (held beyond the last profiled size), then one of 4.
  EXPECT_NEAR(m.DraftSeconds(m.Resolve("d"), four_ctx, {2, 2, 2, 2}, 16),
              0.5 * line.Predict(40, 16) + line.Predict(44, 4), 1e-15);
  EXPECT_DOUBLE_EQ(m.DraftShape("d", 1), 2.0);
  EXPECT_DOUBLE_EQ(m.DraftShape("d", 8), 0.5);

  auto loaded = LatencyModel::FromJson(m.ToJson());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->ToJson(), m.ToJson());
  EXPECT_EQ(loaded->drafter_batch_factors("d"), m.drafter_batch_factors("d"));

  // Calls of one request and of four, each at its shaped time: nothing to correct. Without
  // the shape the same observations pull the correction away from 1 by turns.
  LatencyModel unshaped;
  unshaped.set_drafter("d", DrafterCost{false, line, 0});
  for (int i = 0; i < 50; ++i) {
    for (LatencyModel* model : {&m, &unshaped}) {
      model->ObserveDraft("d", one_ctx, one_k, m.DraftSeconds("d", one_ctx, one_k) / m.draft_scale("d"));
      model->ObserveDraft("d", four_ctx, four_k, m.DraftSeconds("d", four_ctx, four_k) / m.draft_scale("d"));
    }
  }
  EXPECT_NEAR(m.draft_scale("d"), 1.0, 1e-9);
  EXPECT_GT(std::fabs(unshaped.draft_scale("d") - 1.0), 0.1);

  for (const nlohmann::json& bad : {nlohmann::json{{"0", 1.0}}, nlohmann::json{{"2", 0.0}}, nlohmann::json("x")}) {
    const nlohmann::json file = {{"target", {{"alpha", 0}, {"gamma", 0}, {"delta", 0.01}}},
                                 {"drafters", {{"d", {{"alpha", 0}, {"gamma", 1e-4}, {"delta", 0}, {"batch_factors", bad}}}}}};
    const auto status = LatencyModel::FromJson(file).status();
    EXPECT_FALSE(status.ok()) << bad.dump();
    EXPECT_NE(status.message().find("drafters.d.batch_factors"), std::string::npos) << status;
  }
}

}  // namespace
}  // namespace splitspec::router
