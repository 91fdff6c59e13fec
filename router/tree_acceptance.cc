// TreeAcceptance (see tree_acceptance.h).
#include "router/tree_acceptance.h"

#include <algorithm>
#include <cmath>

namespace splitspec::router {

int32_t TreeAcceptance::Width(int32_t depth, int32_t nodes) {
  if (depth <= 0) return 1;
  return std::clamp((nodes + depth - 1) / depth, 2, kMaxWidth);
}

void TreeAcceptance::Observe(const std::string& pool, int32_t depth, int32_t nodes, int32_t accepted,
                             bool path_continued) {
  const int32_t width = Width(depth, nodes);
  auto add = [&](int32_t d, bool success) {
    Counts& c = counts_[Key{pool, width, d}];
    c.successes = c.successes * decay_ + (success ? 1.0 : 0.0);
    c.trials = c.trials * decay_ + 1.0;
  };
  for (int32_t d = 1; d <= accepted; ++d) add(d, true);
  if (path_continued) add(accepted + 1, false);
  // The tree's last depth has no children by construction: it says nothing of the drafter.
  for (int32_t d = 1; d <= std::min(accepted, depth - 1); ++d) {
    Counts& c = counts_[Key{pool, width, d}];
    c.reached = c.reached * decay_ + 1.0;
    c.continued = c.continued * decay_ + ((d < accepted || path_continued) ? 1.0 : 0.0);
  }
  ++observations_;
}

const TreeAcceptance::Counts* TreeAcceptance::Find(std::string_view pool, int32_t width, int32_t depth) const {
  auto it = counts_.find(std::make_tuple(pool, width, depth));
  return it == counts_.end() ? nullptr : &it->second;
}

double TreeAcceptance::DepthAcceptanceFrom(const Counts* counts, double prior) const {
  const Counts c = counts == nullptr ? Counts{} : *counts;
  return std::min(kCap, (c.successes + prior_weight_ * prior) / (c.trials + prior_weight_));
}

double TreeAcceptance::ContinuationFrom(const Counts* counts) const {
  if (counts == nullptr) return 1.0;
  return (counts->continued + prior_weight_) / (counts->reached + prior_weight_);
}

namespace {

// What w independent candidates a depth, each accepted at the chain acceptance a, would give.
double WidthPrior(double chain_acceptance, int32_t width) {
  const double a = std::clamp(chain_acceptance, 0.0, 1.0);
  return 1.0 - std::pow(1.0 - a, width);
}

}  // namespace

std::vector<double> TreeAcceptance::DepthAcceptance(const std::string& pool, int32_t depth, int32_t nodes,
                                                    double chain_acceptance) const {
  const int32_t width = Width(depth, nodes);
  const double prior = WidthPrior(chain_acceptance, width);
  std::vector<double> p(static_cast<size_t>(std::max(depth, 0)), prior);
  for (int32_t d = 1; d <= depth; ++d) p[d - 1] = DepthAcceptanceFrom(Find(pool, width, d), prior);
  return p;
}

std::vector<double> TreeAcceptance::Continuation(const std::string& pool, int32_t depth, int32_t nodes) const {
  const int32_t width = Width(depth, nodes);
  std::vector<double> c(static_cast<size_t>(std::max(depth, 0)), 1.0);
  for (int32_t d = 1; d <= depth; ++d) c[d - 1] = ContinuationFrom(Find(pool, width, d));
  return c;
}

double TreeAcceptance::ExpectedLength(const std::string& pool, int32_t depth, int32_t nodes,
                                      double chain_acceptance) const {
  // DepthAcceptance and Continuation in one pass, one lookup a depth and no vectors: the same
  // figures, multiplied in the same order.
  const int32_t width = Width(depth, nodes);
  const double prior = WidthPrior(chain_acceptance, width);
  double length = 1.0, reach = 1.0, continuation_above = 1.0;
  for (int32_t d = 1; d <= depth; ++d) {
    const Counts* counts = Find(pool, width, d);
    reach *= continuation_above * DepthAcceptanceFrom(counts, prior);
    length += reach;
    continuation_above = ContinuationFrom(counts);
  }
  return length;
}

nlohmann::json TreeAcceptance::Describe() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, c] : counts_) {
    const auto& [pool, width, depth] = key;
    nlohmann::json& row = out[pool][std::to_string(width)];
    row.push_back({{"depth", depth},
                   {"acceptance", c.trials > 0 ? c.successes / c.trials : 0.0},
                   {"continuation", c.reached > 0 ? c.continued / c.reached : 1.0},
                   {"observations", c.trials}});
  }
  return out;
}

}  // namespace splitspec::router
