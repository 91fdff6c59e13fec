// The router core in the simulator: adaptive policies follow falling acceptance, smartspec
// stops speculating at saturation, and every request of a run completes.
#include "router/sim/simulator.h"

#include <deque>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::router::sim {
namespace {

SimConfig BaseConfig() {
  SimConfig c;
  c.num_requests = 60;
  c.input = {64, 128};
  c.output = {300, 400};
  c.seed = 3;
  return c;
}

// Acceptance is forced to 0.9 until step kSwitch, then to 0.2. For each adaptive policy the
// rolling mean k must fall well below its high-acceptance level within kBound steps.
class AcceptanceDropTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AcceptanceDropTest, AdaptivePolicyLowersK) {
  constexpr int64_t kSwitch = 300, kBound = 120, kWindow = 10;
  SimConfig c = BaseConfig();
  c.forced_rate = 0.9;
  std::vector<double> mean_k;  // per step, over speculative requests of the batch
  c.step_hook = [&](const StepStats& s, SimWorld& world) {
    mean_k.push_back(s.MeanK());
    world.set_forced_rate(s.step + 1 < kSwitch ? 0.9 : 0.2);
  };
  nlohmann::json config = nlohmann::json::object();
  auto result = RunSimulation(c, GetParam(), config, /*rate=*/1.5);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_GT(mean_k.size(), static_cast<size_t>(kSwitch + kBound + kWindow));
  double before = 0;
  for (int64_t i = kSwitch - 100; i < kSwitch; ++i) before += mean_k[i];
  before /= 100;
  EXPECT_GT(before, 1.5) << "speculates at high acceptance";
  int64_t reacted = -1;
  for (int64_t i = kSwitch; i + kWindow <= static_cast<int64_t>(mean_k.size()); ++i) {
    double w = 0;
    for (int64_t j = i; j < i + kWindow; ++j) w += mean_k[j];
    if (w / kWindow < 0.5 * before) {
      reacted = i - kSwitch;
      break;
    }
  }
  EXPECT_GE(reacted, 0) << "never lowered k";
  EXPECT_LE(reacted, kBound) << "took " << reacted << " steps";
}

INSTANTIATE_TEST_SUITE_P(Adaptive, AcceptanceDropTest,
                         // cache-fsm is left out: its signal is token reuse, which the
                         // simulator's random tokens do not model (policies_test covers it).
                         ::testing::Values("smartspec", "smartspec:request", "sglang-tiers",
                                           "analytical", "fsm"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

TEST(SimulatorTest, SmartSpecStopsSpeculatingAtSaturation) {
  SimConfig c = BaseConfig();
  c.num_requests = 400;
  c.output = {100, 150};
  int64_t big_steps = 0, big_zero_steps = 0;
  c.step_hook = [&](const StepStats& s, SimWorld&) {
    if (s.batch_size < 128) return;
    ++big_steps;
    if (s.drafted_tokens == 0) ++big_zero_steps;
  };
  // Far beyond the service rate: the batch fills up to max_running.
  auto result = RunSimulation(c, "smartspec", nlohmann::json::object(), /*rate=*/200);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_GT(big_steps, 50);
  EXPECT_EQ(big_zero_steps, big_steps);
}

TEST(SimulatorTest, EveryRequestCompletesAndSpeculationHelpsAtLowLoad) {
  SimConfig c = BaseConfig();
  auto none = RunSimulation(c, "none", nlohmann::json::object(), 1.0);
  auto spec = RunSimulation(c, "static:3", nlohmann::json::object(), 1.0);
  auto smart = RunSimulation(c, "smartspec", nlohmann::json::object(), 1.0);
  ASSERT_TRUE(none.ok() && spec.ok() && smart.ok());
  EXPECT_EQ(none->completed, c.num_requests);
  EXPECT_EQ(spec->completed, c.num_requests);
  EXPECT_EQ(none->mean_k, 0.0);
  EXPECT_NEAR(spec->mean_k, 3.0, 0.1);  // clamped only in the last steps of each request
  EXPECT_LT(spec->mean_latency_s, none->mean_latency_s);
  EXPECT_LT(smart->mean_latency_s, none->mean_latency_s);
  EXPECT_GT(spec->mean_accept_length, 1.5);
}

// The simulated drafter costs each draft forward as the hardware's latency model prices it,
// the drafter's batch shape included: a first forward feeding two requests' catch-up (4
// tokens), then one forward of the request drafting deeper.
TEST(SimulatorTest, SimulatedDrafterPricesEachForwardWithTheDraftersShape) {
  const ForwardCoefficients line{1e-6, 1e-4, 0.001};
  SimHardware hw;
  hw.latency.set_drafter("d", DrafterCost{false, line, 0});
  hw.latency.set_drafter_batch_factors("d", {{1, 3.0}, {4, 1.5}});
  SimWorld world(AcceptanceProcessConfig{}, 1);
  VirtualClock clock;
  SimDrafter drafter("d", &hw, &world, &clock);
  std::vector<spec::ProposeItem> items(2);
  items[0].id = 1;
  items[0].known_length = 10;
  items[0].new_tokens = {5, 6};
  items[0].shape.depth = 2;
  items[1].id = 2;
  items[1].known_length = 20;
  items[1].new_tokens = {7, 8};
  items[1].shape.depth = 1;
  auto response = drafter.Propose(items);
  ASSERT_TRUE(response.ok()) << response.status();
  // Forward 1: context 10 + 20, 4 tokens fed (shape 1.5); forward 2: request 1 alone, its
  // context 12 + 1 (shape 3).
  const double expect = 1.5 * line.Predict(30, 4) + 3.0 * line.Predict(13, 1);
  EXPECT_NEAR(response->compute_seconds, expect, 1e-12);
}

TEST(SimulatorTest, RejectsBadConfig) {
  SimConfig c = BaseConfig();
  EXPECT_FALSE(RunSimulation(c, "none", nlohmann::json::object(), 0).ok());
  EXPECT_FALSE(RunSimulation(c, "bogus", nlohmann::json::object(), 1).ok());
  c.input = {5, 2};
  EXPECT_FALSE(RunSimulation(c, "none", nlohmann::json::object(), 1).ok());
}

}  // namespace
}  // namespace splitspec::router::sim
