// /server_info JSON from speculation snapshots.
#include "common/metrics/server_info.h"

namespace splitspec::metrics {
namespace {

// Per-position acceptance rate: accepted at p over drafts (vLLM's per-position curve).
nlohmann::json PerPositionRates(const SpecSnapshot& s) {
  nlohmann::json rates = nlohmann::json::array();
  for (double accepted : s.accepted_per_position) {
    rates.push_back(s.num_drafts > 0 ? accepted / s.num_drafts : 0.0);
  }
  return rates;
}

}  // namespace

nlohmann::json SpecSnapshotJson(const SpecSnapshot& s) {
  return nlohmann::json{
      {"pool", s.pool},
      {"policy", s.policy},
      {"speculative_num_steps", s.active_tier},
      {"avg_spec_accept_length", s.AvgAcceptLength()},
      {"spec_acceptance_rate", s.AcceptanceRate()},
      {"spec_acceptance_rate_per_position", PerPositionRates(s)},
      {"spec_num_drafts", s.num_drafts},
      {"spec_num_draft_tokens", s.num_draft_tokens},
      {"spec_num_accepted_tokens", s.num_accepted_tokens},
      {"spec_num_tree_drafts", s.num_tree_drafts},
      {"spec_mean_proposal_length", s.mean_proposal_length},
      {"goodput_estimated_tokens_per_second", s.goodput_estimated_tokens_per_second},
      {"goodput_observed_tokens_per_second", s.goodput_observed_tokens_per_second},
  };
}

nlohmann::json ServerInfoJson(absl::Span<const SpecSnapshot> pools) {
  SpecSnapshot total;
  nlohmann::json states = nlohmann::json::array();
  double tier_sum = 0;
  for (const SpecSnapshot& s : pools) {
    states.push_back(SpecSnapshotJson(s));
    total.num_drafts += s.num_drafts;
    total.num_draft_tokens += s.num_draft_tokens;
    total.num_accepted_tokens += s.num_accepted_tokens;
    total.num_tree_drafts += s.num_tree_drafts;
    tier_sum += s.active_tier;
  }
  const double active_tier = pools.empty() ? 0.0 : tier_sum / static_cast<double>(pools.size());
  return nlohmann::json{
      {"speculative_num_steps", active_tier},
      {"avg_spec_accept_length", total.AvgAcceptLength()},
      {"spec_acceptance_rate", total.AcceptanceRate()},
      {"spec_num_drafts", total.num_drafts},
      {"spec_num_draft_tokens", total.num_draft_tokens},
      {"spec_num_accepted_tokens", total.num_accepted_tokens},
      {"spec_num_tree_drafts", total.num_tree_drafts},
      {"internal_states", std::move(states)},
  };
}

}  // namespace splitspec::metrics
