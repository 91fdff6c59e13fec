// `--policy NAME --policy-config FILE` -> a SpeculationPolicy.
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "router/policies/policies.h"

namespace splitspec::router {
namespace {

// Reads config[key] into *out when present; nlohmann's type errors become a message.
template <typename T>
absl::Status Read(const nlohmann::json& config, const char* key, T* out) {
  if (!config.is_object() || !config.contains(key)) return absl::OkStatus();
  try {
    *out = config.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("policy config key '", key, "': ", e.what()));
  }
  return absl::OkStatus();
}

#define SPLITSPEC_READ(key, field)                  \
  do {                                              \
    absl::Status s_ = Read(config, key, &(field));  \
    if (!s_.ok()) return s_;                        \
  } while (0)

absl::StatusOr<std::unique_ptr<SpeculationPolicy>> MakeSmartSpec(const nlohmann::json& config) {
  SmartSpecPolicy::Config c;
  std::string granularity = "batch";
  SPLITSPEC_READ("granularity", granularity);
  if (granularity != "batch" && granularity != "request") {
    return absl::InvalidArgumentError("smartspec granularity must be 'batch' or 'request'");
  }
  c.per_request = granularity == "request";
  SPLITSPEC_READ("max_k", c.max_k);
  SPLITSPEC_READ("prefill_disable_threshold", c.prefill_disable_threshold);
  SPLITSPEC_READ("prefill_resume_threshold", c.prefill_resume_threshold);
  SPLITSPEC_READ("prefill_window", c.prefill_window);
  SPLITSPEC_READ("prefix_search", c.prefix_search);
  SPLITSPEC_READ("trees", c.trees);
  SPLITSPEC_READ("max_tree_nodes", c.max_tree_nodes);
  SPLITSPEC_READ("explore_verifications", c.explore_verifications);
  if (c.explore_verifications < 0) return absl::InvalidArgumentError("smartspec: explore_verifications >= 0");
  if (c.max_tree_nodes < 2 || c.max_tree_nodes > 256) {
    return absl::InvalidArgumentError("smartspec: max_tree_nodes in [2, 256]");
  }
  if (c.max_k < 0 || c.prefill_window < 1 ||
      !(c.prefill_disable_threshold >= 0 && c.prefill_disable_threshold <= 1)) {
    return absl::InvalidArgumentError(
        "smartspec: max_k >= 0, prefill_window >= 1, prefill_disable_threshold in [0, 1]");
  }
  if (!(c.prefill_resume_threshold >= 0 && c.prefill_resume_threshold <= c.prefill_disable_threshold)) {
    return absl::InvalidArgumentError("smartspec: prefill_resume_threshold in [0, prefill_disable_threshold]");
  }
  return std::unique_ptr<SpeculationPolicy>(new SmartSpecPolicy(c));
}

absl::StatusOr<std::unique_ptr<SpeculationPolicy>> MakeTiers(const nlohmann::json& config) {
  SglangTiersPolicy::Config c;
  SPLITSPEC_READ("candidate_steps", c.candidate_steps);
  SPLITSPEC_READ("ema_alpha", c.ema_alpha);
  SPLITSPEC_READ("warmup_batches", c.warmup_batches);
  SPLITSPEC_READ("update_interval", c.update_interval);
  SPLITSPEC_READ("down_hysteresis", c.down_hysteresis);
  SPLITSPEC_READ("up_hysteresis", c.up_hysteresis);
  SPLITSPEC_READ("initial_steps", c.initial_steps);
  if (c.candidate_steps.empty()) {
    return absl::InvalidArgumentError("sglang-tiers: candidate_steps must not be empty");
  }
  for (int32_t s : c.candidate_steps) {
    if (s < 0) return absl::InvalidArgumentError("sglang-tiers: candidate_steps must be >= 0");
  }
  if (!(c.ema_alpha > 0 && c.ema_alpha <= 1) || c.warmup_batches < 0 || c.update_interval < 1) {
    return absl::InvalidArgumentError(
        "sglang-tiers: ema_alpha in (0, 1], warmup_batches >= 0, update_interval >= 1");
  }
  return std::unique_ptr<SpeculationPolicy>(new SglangTiersPolicy(c));
}

absl::StatusOr<std::unique_ptr<SpeculationPolicy>> MakeAnalytical(const nlohmann::json& config) {
  AnalyticalPolicy::Config c;
  SPLITSPEC_READ("gamma_max", c.gamma_max);
  SPLITSPEC_READ("history", c.history);
  SPLITSPEC_READ("prior_weight", c.prior_weight);
  if (c.gamma_max < 0 || c.history < 1 || c.prior_weight < 0) {
    return absl::InvalidArgumentError(
        "analytical: gamma_max >= 0, history >= 1, prior_weight >= 0");
  }
  return std::unique_ptr<SpeculationPolicy>(new AnalyticalPolicy(c));
}

absl::StatusOr<std::unique_ptr<SpeculationPolicy>> MakeFsm(const nlohmann::json& config,
                                                           bool cache) {
  FsmPolicy::Config c;
  c.use_cache = cache;
  SPLITSPEC_READ("gamma_max", c.gamma_max);
  SPLITSPEC_READ("gamma_init", c.gamma_init);
  SPLITSPEC_READ("probe_after", c.probe_after);
  if (c.gamma_max < 0 || c.gamma_init < 0 || c.probe_after < 1) {
    return absl::InvalidArgumentError("fsm: gamma_max >= 0, gamma_init >= 0, probe_after >= 1");
  }
  return std::unique_ptr<SpeculationPolicy>(new FsmPolicy(c));
}

#undef SPLITSPEC_READ

}  // namespace

absl::StatusOr<std::unique_ptr<SpeculationPolicy>> MakePolicy(const std::string& name,
                                                              const nlohmann::json& config) {
  if (!config.is_null() && !config.is_object()) {
    return absl::InvalidArgumentError("policy config must be a JSON object");
  }
  if (name == "none") return std::unique_ptr<SpeculationPolicy>(new NonePolicy());
  if (absl::StartsWith(name, "static:")) {
    int32_t k = 0;
    if (!absl::SimpleAtoi(name.substr(7), &k) || k < 0 || k > 64) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad policy '", name, "': expected static:K with 0 <= K <= 64"));
    }
    return std::unique_ptr<SpeculationPolicy>(new StaticPolicy(k));
  }
  if (absl::StartsWith(name, "static-tree:")) {
    const std::vector<std::string> parts = absl::StrSplit(name.substr(12), ':');
    int32_t depth = 0, nodes = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &depth) || !absl::SimpleAtoi(parts[1], &nodes) ||
        depth < 1 || depth > 64 || nodes < 1 || nodes > 256) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad policy '", name, "': expected static-tree:D:N with 1 <= D <= 64 levels and 1 <= N <= 256 nodes"));
    }
    return std::unique_ptr<SpeculationPolicy>(new StaticTreePolicy(depth, nodes));
  }
  if (name == "smartspec") return MakeSmartSpec(config);
  if (name == "sglang-tiers") return MakeTiers(config);
  if (name == "analytical") return MakeAnalytical(config);
  if (name == "fsm") return MakeFsm(config, false);
  if (name == "cache-fsm") return MakeFsm(config, true);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown policy '", name,
      "' (none, static:K, static-tree:D:N, smartspec, sglang-tiers, analytical, fsm, cache-fsm)"));
}

absl::StatusOr<nlohmann::json> LoadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not JSON"));
  return j;
}

}  // namespace splitspec::router
