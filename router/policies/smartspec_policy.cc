// SmartSpec: goodput-maximising candidate batch and proposal lengths, with prefill disabling.
#include <algorithm>

#include "router/candidate_batches.h"
#include "router/goodput.h"
#include "router/policies/policies.h"

namespace splitspec::router {

std::vector<int32_t> SmartSpecPolicy::Decide(const PolicyInput& input) {
  const int32_t v = std::min(config_.max_k, input.max_k);
  std::vector<GoodputItem> items;
  items.reserve(input.requests.size());
  bool any_speculative = false;
  for (const PolicyRequest& r : input.requests) {
    GoodputItem item;
    item.context = r.context_tokens;
    item.pool = r.pool;
    item.speculative = r.speculative && r.max_useful_k > 0;
    item.acceptance = config_.per_request || input.acceptance == nullptr
                          ? r.acceptance
                          : input.acceptance->Pool(r.pool);
    any_speculative |= item.speculative;
    items.push_back(std::move(item));
  }
  if (items.empty()) return {};
  const LatencyModel fallback;
  const LatencyModel& model = input.latency != nullptr ? *input.latency : fallback;

  // Candidate batches: FCFS prefixes that keep every must-run request (the whole batch when
  // the search is off).
  int32_t min_size = 1;
  for (size_t i = 0; i < input.requests.size(); ++i) {
    if (input.requests[i].must_run) min_size = static_cast<int32_t>(i) + 1;
  }
  if (!config_.prefix_search) min_size = static_cast<int32_t>(items.size());
  const BatchChoice choice =
      BestFcfsPrefix(model, items, any_speculative ? v : 0, min_size, config_.per_request);
  std::vector<int32_t> k = choice.k;
  const size_t run = static_cast<size_t>(choice.size);
  if (run < items.size()) {
    ++short_prefix_steps_;
    sat_out_ += static_cast<int64_t>(items.size() - run);
  }
  bool all_speculative = true;
  for (size_t i = 0; i < run; ++i) all_speculative &= items[i].speculative;
  // The prefill-disabling signal is "would speculation pay for this batch if everyone could
  // speculate". Using the actual decision instead feeds back on itself: once a few requests
  // are non-speculative, drafting for the rest no longer amortises the drafter's fixed cost,
  // goodput says 0, and ever more new requests get admitted non-speculative.
  bool nothing;
  if (all_speculative && !config_.per_request && v > 0) {
    nothing = std::all_of(k.begin(), k.begin() + run, [](int32_t x) { return x == 0; });
  } else {
    std::vector<GoodputItem> all = items;
    for (GoodputItem& item : all) {
      item.speculative = true;
      if (input.acceptance != nullptr) item.acceptance = input.acceptance->Pool(item.pool);
    }
    GoodputModel goodput(model, std::move(all), std::max(v, 1));
    const std::vector<int32_t> would = goodput.BestUniform();
    nothing = std::all_of(would.begin(), would.end(), [](int32_t x) { return x == 0; });
  }
  proposed_nothing_.push_back(nothing);
  while (static_cast<int32_t>(proposed_nothing_.size()) > std::max(config_.prefill_window, 1)) {
    proposed_nothing_.pop_front();
  }
  for (size_t i = 0; i < run; ++i) {
    if (items[i].speculative) ++k_histogram_[k[i]];
  }
  for (size_t i = run; i < k.size(); ++i) k[i] = kSitOut;
  return k;
}

double SmartSpecPolicy::ZeroFraction() const {
  if (proposed_nothing_.empty()) return 0.0;
  const auto zeros = std::count(proposed_nothing_.begin(), proposed_nothing_.end(), true);
  return static_cast<double>(zeros) / proposed_nothing_.size();
}

bool SmartSpecPolicy::SpeculateNewRequest() {
  const bool speculate = ZeroFraction() <= config_.prefill_disable_threshold;
  if (!speculate) ++disabled_prefills_;
  return speculate;
}

nlohmann::json SmartSpecPolicy::Describe() const {
  nlohmann::json hist = nlohmann::json::object();
  for (const auto& [k, n] : k_histogram_) hist[std::to_string(k)] = n;
  return {{"granularity", config_.per_request ? "request" : "batch"},
          {"max_k", config_.max_k},
          {"prefill_disable_threshold", config_.prefill_disable_threshold},
          {"recent_zero_fraction", ZeroFraction()},
          {"disabled_prefills", disabled_prefills_},
          {"prefix_search", config_.prefix_search},
          {"short_prefix_steps", short_prefix_steps_},
          {"sat_out_request_steps", sat_out_},
          {"k_histogram", hist}};
}

}  // namespace splitspec::router
