// `splitspec profile` against real services on loopback (the integration cluster's tiny
// verifier, draft-model drafter and n-gram drafter): it must finish a small grid, print the
// fits, write a latency model the router loads with finite non-negative coefficients and the
// fit quality recorded, release every session it made, and refuse a grid the workers cannot
// serve.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "common/rpc/worker_clients.h"
#include "nlohmann/json.hpp"
#include "router/latency_model.h"
#include "tests/integration/cluster.h"

namespace splitspec::testing {
namespace {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()) + ".json")).string();
}

bool FiniteNonNegative(double v) { return std::isfinite(v) && v >= 0; }

TEST(ProfileTest, FitsBothWorkersAndWritesALoadableLatencyModel) {
  Cluster& cluster = Cluster::Get();
  const std::string out = TempPath("splitspec-profile");
  const CommandResult run = RunCommand(std::string(SPLITSPEC_CLI_BIN) + " profile --verifier " + cluster.verifier() +
                                       " --drafter model=" + cluster.model_drafter() +
                                       ",ngram=" + cluster.ngram_drafter() + " --out " + out +
                                       " --batch-sizes 1,2,4 --contexts 16,48 --depths 0,1,3 --repeats 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The fit quality is reported per model, and the RPC overhead measured.
  EXPECT_NE(run.output.find("target   alpha="), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("model    alpha="), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("R^2="), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("worst relative error="), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rpc overhead"), std::string::npos) << run.output;

  // The router's loader accepts it, with the drafter pools named on the command line.
  auto model = router::LatencyModel::Load(out);
  ASSERT_TRUE(model.ok()) << model.status();
  const router::ForwardCoefficients target = model->EffectiveTarget();
  EXPECT_TRUE(FiniteNonNegative(target.alpha) && FiniteNonNegative(target.gamma) && FiniteNonNegative(target.delta));
  // A forward costs something: the fit cannot be all zeros.
  EXPECT_GT(target.Predict(64, 4), 0.0);
  const router::DrafterCost draft = model->EffectiveDrafter("model");
  EXPECT_FALSE(draft.model_free);
  EXPECT_TRUE(FiniteNonNegative(draft.forward.alpha) && FiniteNonNegative(draft.forward.gamma) &&
              FiniteNonNegative(draft.forward.delta));
  EXPECT_GT(draft.forward.Predict(64, 1), 0.0);
  // Each model's batch shape, one factor per profiled size (the target's by tokens fed; the
  // draft model's by requests, one token each): 1, 2 and 4.
  const std::map<int32_t, double>& draft_shape = model->drafter_batch_factors("model");
  EXPECT_EQ(draft_shape.size(), 3u);
  for (const auto& [n, factor] : draft_shape) EXPECT_TRUE(factor > 0 && std::isfinite(factor)) << n;
  EXPECT_FALSE(model->target_batch_factors().empty());
  EXPECT_TRUE(model->drafter_batch_factors("ngram").empty());
  const router::DrafterCost ngram = model->EffectiveDrafter("ngram");
  EXPECT_TRUE(ngram.model_free);
  EXPECT_TRUE(FiniteNonNegative(ngram.constant_seconds));
  EXPECT_TRUE(FiniteNonNegative(model->RpcSeconds()));

  // The fit record: R^2 and worst error per fitted model, and the grid that produced them.
  std::ifstream in(out);
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(json.is_object());
  ASSERT_TRUE(json.contains("fit"));
  for (const nlohmann::json* fit : {&json["fit"]["target"], &json["fit"]["drafters"]["model"]}) {
    ASSERT_TRUE(fit->contains("r2") && (*fit)["r2"].is_number()) << fit->dump();
    const double r2 = (*fit)["r2"].get<double>();
    EXPECT_TRUE(std::isfinite(r2) && r2 <= 1.0) << r2;
    ASSERT_TRUE(fit->contains("worst_relative_error")) << fit->dump();
    EXPECT_TRUE(FiniteNonNegative((*fit)["worst_relative_error"].get<double>()));
  }
  // 3 batch sizes x 2 contexts x 3 depths verify samples; 2 non-zero depths for the drafter.
  EXPECT_EQ(json["fit"]["target"]["samples"].get<int>(), 18);
  EXPECT_EQ(json["fit"]["drafters"]["model"]["samples"].get<int>(), 12);
  std::filesystem::remove(out);

  // Every session the profiler opened is gone again.
  rpc::VerifierClient verifier(rpc::MakeChannel(cluster.verifier()));
  auto info = verifier.GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->live_sessions, 0);
  rpc::DrafterClient drafter(rpc::MakeChannel(cluster.model_drafter()));
  auto drafter_info = drafter.GetInfo();
  ASSERT_TRUE(drafter_info.ok()) << drafter_info.status();
  EXPECT_EQ(drafter_info->live_sessions, 0);
}

TEST(ProfileTest, RefusesDepthsAboveTheWorkersLimit) {
  Cluster& cluster = Cluster::Get();
  const std::string out = TempPath("splitspec-profile-bad");
  // The cluster's drafters accept at most 8 draft tokens.
  const CommandResult run = RunCommand(std::string(SPLITSPEC_CLI_BIN) + " profile --verifier " + cluster.verifier() +
                                       " --drafter " + cluster.model_drafter() + " --out " + out + " --depths 0,9");
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("max draft tokens"), std::string::npos) << run.output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace splitspec::testing
