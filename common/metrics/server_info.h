// The speculation part of the router's /server_info JSON (and of GetServerInfo), in the shape
// SGLang users query: `.internal_states[0] | {speculative_num_steps, avg_spec_accept_length}`.
#ifndef SPLITSPEC_COMMON_METRICS_SERVER_INFO_H_
#define SPLITSPEC_COMMON_METRICS_SERVER_INFO_H_

#include "absl/types/span.h"
#include "common/metrics/spec_snapshot.h"
#include "nlohmann/json.hpp"

namespace splitspec::metrics {

// One pool's figures: speculative_num_steps (the active tier), avg_spec_accept_length,
// spec_acceptance_rate, the raw totals, per-position acceptance rates and goodput.
nlohmann::json SpecSnapshotJson(const SpecSnapshot& snapshot);

// {"internal_states": [one object per pool], plus at top level the figures over all pools:
// totals summed, avg_spec_accept_length recomputed from the totals, speculative_num_steps the
// mean of the pools' active tiers}. The router merges its own fields (model, policy config...)
// into the result.
nlohmann::json ServerInfoJson(absl::Span<const SpecSnapshot> pools);

}  // namespace splitspec::metrics

#endif  // SPLITSPEC_COMMON_METRICS_SERVER_INFO_H_
