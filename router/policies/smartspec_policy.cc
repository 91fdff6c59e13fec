// SmartSpec: goodput-maximising candidate batch and proposal lengths, with prefill disabling.
#include <algorithm>

#include "router/acceptance.h"
#include "router/candidate_batches.h"
#include "router/expected_length.h"
#include "router/goodput.h"
#include "router/policies/policies.h"

namespace splitspec::router {

// The acceptance a request's chain is judged by: its own estimate at per-request granularity,
// its pool's otherwise. Trees are weighed against chains with the same one.
double SmartSpecPolicy::ChainAcceptance(const PolicyInput& input, const PolicyRequest& r) const {
  return config_.per_request || input.acceptance == nullptr ? r.acceptance : input.acceptance->Pool(r.pool);
}

SmartSpecPolicy::ChainPlan SmartSpecPolicy::PriceChains(const PolicyInput& input) const {
  const int32_t v = std::min(config_.max_k, input.max_k);
  std::vector<GoodputItem> items;
  items.reserve(input.requests.size());
  bool any_speculative = false;
  for (const PolicyRequest& r : input.requests) {
    GoodputItem item;
    item.context = r.context_tokens;
    item.pool = r.pool;
    item.speculative = r.speculative && r.max_useful_k > 0;
    item.acceptance = ChainAcceptance(input, r);
    item.draft_catch_up = r.draft_catch_up;
    item.remaining_tokens = r.remaining_tokens;
    any_speculative |= item.speculative;
    items.push_back(std::move(item));
  }
  ChainPlan plan;
  if (items.empty()) return plan;
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
  bool all_speculative = true;
  for (size_t i = 0; i < run; ++i) all_speculative &= items[i].speculative;
  // The prefill-disabling signal is "would speculation pay for this batch if everyone could
  // speculate, every step". Using the actual decision instead feeds back on itself: once a few
  // requests are non-speculative, drafting for the rest no longer amortises the drafter's fixed
  // cost, goodput says 0, and ever more new requests get admitted non-speculative. Likewise a
  // request whose drafter must catch up (admitted or resumed without a drafter prefill) is
  // charged for it and decodes plainly, which says nothing about the steady state: counted as
  // "nothing", it kept the share high, the next request was admitted non-speculative, resumed
  // with its whole history to catch up, and so on, for good. The actual decision stands in for
  // the steady one only when it is the same question: every request speculative, none behind.
  const bool none_behind = std::all_of(items.begin(), items.begin() + run,
                                       [](const GoodputItem& item) { return item.draft_catch_up <= 0; });
  bool nothing;
  if (all_speculative && none_behind && !config_.per_request && v > 0) {
    nothing = std::all_of(k.begin(), k.begin() + run, [](int32_t x) { return x == 0; });
  } else {
    std::vector<GoodputItem> all = items;
    for (GoodputItem& item : all) {
      item.speculative = true;
      item.draft_catch_up = 0;  // the steady state: would drafting every step pay?
      if (input.acceptance != nullptr) item.acceptance = input.acceptance->Pool(item.pool);
    }
    GoodputModel goodput(model, std::move(all), std::max(v, 1));
    const std::vector<int32_t> would = goodput.BestUniform();
    nothing = std::all_of(would.begin(), would.end(), [](int32_t x) { return x == 0; });
  }
  for (size_t i = 0; i < run; ++i) {
    if (items[i].speculative) plan.counted_k.push_back(k[i]);
  }
  for (size_t i = run; i < k.size(); ++i) k[i] = kSitOut;
  plan.k = std::move(k);
  plan.run = run;
  plan.nothing = nothing;
  return plan;
}

void SmartSpecPolicy::RecordChains(const ChainPlan& plan) {
  if (plan.k.empty()) return;  // no requests: no step
  if (plan.run < plan.k.size()) {
    ++short_prefix_steps_;
    sat_out_ += static_cast<int64_t>(plan.k.size() - plan.run);
  }
  proposed_nothing_.push_back(plan.nothing);
  while (static_cast<int32_t>(proposed_nothing_.size()) > std::max(config_.prefill_window, 1)) {
    proposed_nothing_.pop_front();
  }
  for (int32_t k : plan.counted_k) ++k_histogram_[k];
}

std::vector<int32_t> SmartSpecPolicy::Decide(const PolicyInput& input) {
  ChainPlan plan = PriceChains(input);
  RecordChains(plan);
  return std::move(plan.k);
}

double SmartSpecPolicy::ZeroFraction() const {
  if (proposed_nothing_.empty()) return 0.0;
  const auto zeros = std::count(proposed_nothing_.begin(), proposed_nothing_.end(), true);
  return static_cast<double>(zeros) / proposed_nothing_.size();
}

namespace {

// The tree shapes tried per request: D levels with 2D, 3D or 4D nodes (widths 2-4), and a
// single level of 2-4 siblings, within the node cap.
std::vector<ProposalChoice> TreeShapes(int32_t max_depth, int32_t max_nodes) {
  std::vector<ProposalChoice> shapes;
  for (int32_t width = 2; width <= 4; ++width) {
    for (int32_t depth = 1; depth <= max_depth; ++depth) {
      if (depth * width <= max_nodes) shapes.push_back({depth, depth * width});
    }
  }
  return shapes;
}

}  // namespace

struct SmartSpecPolicy::Priced : PricedProposals {
  ChainPlan chains;
  int64_t explored = 0;
};

std::vector<ProposalChoice> SmartSpecPolicy::DecideProposals(const PolicyInput& input) {
  return RecordProposals(PriceProposals(input));
}

std::unique_ptr<PricedProposals> SmartSpecPolicy::PriceProposals(const PolicyInput& input) const {
  auto priced = std::make_unique<Priced>();
  priced->chains = PriceChains(input);
  priced->choices = PriceShapes(input, priced->chains.k);
  priced->explored = Explore(input, &priced->choices);
  return priced;
}

std::vector<ProposalChoice> SmartSpecPolicy::RecordProposals(std::unique_ptr<PricedProposals> priced) {
  // Only this policy's PriceProposals makes the decisions it is given.
  auto& mine = static_cast<Priced&>(*priced);
  RecordChains(mine.chains);
  for (const ProposalChoice& choice : mine.choices) {
    if (!choice.tree()) continue;
    ++tree_choices_;
    ++shape_histogram_[std::to_string(choice.depth) + ":" + std::to_string(choice.nodes)];
  }
  explored_ += mine.explored;
  return std::move(mine.choices);
}

int64_t SmartSpecPolicy::Explore(const PolicyInput& input, std::vector<ProposalChoice>* choices) const {
  if (config_.explore_verifications <= 0 || input.acceptance == nullptr) return 0;
  int64_t explored = 0;
  const LatencyModel fallback;
  const LatencyModel& model = input.latency != nullptr ? *input.latency : fallback;
  for (size_t i = 0; i < choices->size() && i < input.requests.size(); ++i) {
    const PolicyRequest& r = input.requests[i];
    ProposalChoice& c = (*choices)[i];
    if (c.depth != 0 || !r.speculative || r.max_useful_k < 1 || r.pool.empty()) continue;
    if (input.acceptance->PoolVerifications(r.pool) >= config_.explore_verifications) continue;
    // Only a drafter that could pay: in a steady step (its catch-up, paid once, left out) a
    // chain of one beats plain decoding for this request at the best acceptance there is; a
    // drafter that costs more than it could ever save stays unmeasured.
    const GoodputItem best{r.context_tokens, kAcceptanceCap, r.pool, true, 0, r.remaining_tokens};
    const GoodputModel alone(model, {best}, 1);
    const int32_t plain[] = {0}, one[] = {1};
    if (alone.Goodput(one) <= alone.Goodput(plain)) continue;
    c = ProposalChoice::Chain(1);
    c.expected_tokens = ExpectedChainLength(ChainAcceptance(input, r), 1);
    ++explored;
  }
  return explored;
}

std::vector<ProposalChoice> SmartSpecPolicy::PriceShapes(const PolicyInput& input,
                                                         const std::vector<int32_t>& k) const {
  std::vector<ProposalChoice> choices;
  for (size_t i = 0; i < k.size(); ++i) {
    ProposalChoice chain = ProposalChoice::Chain(k[i]);
    if (k[i] > 0) chain.expected_tokens = ExpectedChainLength(ChainAcceptance(input, input.requests[i]), k[i]);
    choices.push_back(chain);
  }
  if (!config_.trees || input.tree_acceptance == nullptr || input.requests.empty()) return choices;
  const int32_t max_nodes = std::min(config_.max_tree_nodes, input.max_k);
  const int32_t max_depth = std::min(config_.max_k, input.max_k);
  const std::vector<ProposalChoice> shapes = TreeShapes(max_depth, max_nodes);
  if (shapes.empty()) return choices;

  const LatencyModel fallback;
  const LatencyModel& model = input.latency != nullptr ? *input.latency : fallback;
  std::vector<GoodputItem> items;
  size_t run = 0;
  for (size_t i = 0; i < input.requests.size(); ++i) {
    const PolicyRequest& r = input.requests[i];
    items.push_back(GoodputItem{r.context_tokens, ChainAcceptance(input, r), r.pool, r.speculative,
                                r.draft_catch_up, r.remaining_tokens, r.greedy});
    if (k[i] != kSitOut) run = i + 1;
  }
  GoodputModel goodput(model, items, max_depth);
  // Per item: levels drafted, nodes verified, expected tokens; sitting-out items count nothing.
  std::vector<int32_t> depth(run, 0), verified(run, 0);
  std::vector<double> tokens(run, 0.0);
  for (size_t i = 0; i < run; ++i) {
    if (k[i] == kSitOut) continue;
    depth[i] = verified[i] = k[i];
    tokens[i] = ExpectedChainLength(items[i].acceptance, k[i]);
  }
  auto goodput_of = [&]() {
    double total = 0;
    for (double t : tokens) total += t;
    const double seconds = goodput.PrefixStepSecondsFor(run, depth, verified);
    return seconds > 0 ? total / seconds : 0.0;
  };
  double best = goodput_of();
  // Expected tokens of each shape for one (pool, acceptance): at batch granularity every
  // request of a pool shares them, so they are looked up once, not once per request.
  std::vector<double> shape_tokens(shapes.size(), 0.0);
  const std::string* tokens_pool = nullptr;
  double tokens_acceptance = -1;
  for (size_t i = 0; i < run; ++i) {
    const PolicyRequest& r = input.requests[i];
    if (k[i] == kSitOut || !r.speculative || r.max_useful_k <= 0) continue;
    const int32_t chain_depth = depth[i], chain_verified = verified[i];
    const double chain_tokens = tokens[i];
    ProposalChoice chosen = choices[i];
    if (tokens_pool == nullptr || *tokens_pool != r.pool || tokens_acceptance != items[i].acceptance) {
      tokens_pool = &r.pool;
      tokens_acceptance = items[i].acceptance;
      for (size_t s = 0; s < shapes.size(); ++s) {
        shape_tokens[s] =
            input.tree_acceptance->ExpectedLength(r.pool, shapes[s].depth, shapes[s].nodes, tokens_acceptance);
      }
    }
    for (size_t s = 0; s < shapes.size(); ++s) {
      const ProposalChoice& shape = shapes[s];
      if (shape.depth > r.max_useful_k) continue;
      depth[i] = shape.depth;
      verified[i] = shape.nodes;
      tokens[i] = shape_tokens[s];
      const double g = goodput_of();
      if (g > best * (1.0 + 1e-9)) {
        best = g;
        chosen = shape;
        chosen.expected_tokens = tokens[i];
      }
    }
    choices[i] = chosen;
    depth[i] = chosen.tree() ? chosen.depth : chain_depth;
    verified[i] = chosen.tree() ? chosen.nodes : chain_verified;
    tokens[i] = chosen.tree() ? chosen.expected_tokens : chain_tokens;
  }
  return choices;
}

bool SmartSpecPolicy::SpeculateNewRequest() {
  const bool speculate = ZeroFraction() <= config_.prefill_disable_threshold;
  if (!speculate) ++disabled_prefills_;
  return speculate;
}

bool SmartSpecPolicy::ResumeSpeculation() {
  // Only once the window holds enough steps to judge: an empty one says nothing yet.
  if (static_cast<int32_t>(proposed_nothing_.size()) < config_.prefill_window) return false;
  const bool resume = ZeroFraction() <= config_.prefill_resume_threshold;
  if (resume) ++resumed_requests_;
  return resume;
}

nlohmann::json SmartSpecPolicy::Describe() const {
  nlohmann::json hist = nlohmann::json::object();
  for (const auto& [k, n] : k_histogram_) hist[std::to_string(k)] = n;
  return {{"granularity", config_.per_request ? "request" : "batch"},
          {"max_k", config_.max_k},
          {"prefill_disable_threshold", config_.prefill_disable_threshold},
          {"recent_zero_fraction", ZeroFraction()},
          {"prefill_resume_threshold", config_.prefill_resume_threshold},
          {"disabled_prefills", disabled_prefills_},
          {"resumed_requests", resumed_requests_},
          {"prefix_search", config_.prefix_search},
          {"short_prefix_steps", short_prefix_steps_},
          {"sat_out_request_steps", sat_out_},
          {"k_histogram", hist},
          {"trees", config_.trees},
          {"max_tree_nodes", config_.max_tree_nodes},
          {"tree_request_steps", tree_choices_},
          {"tree_shape_histogram", shape_histogram_},
          {"explore_verifications", config_.explore_verifications},
          {"explored_request_steps", explored_}};
}

}  // namespace splitspec::router
