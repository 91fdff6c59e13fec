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

std::vector<double> TreeAcceptance::DepthAcceptance(const std::string& pool, int32_t depth, int32_t nodes,
                                                    double chain_acceptance) const {
  const int32_t width = Width(depth, nodes);
  const double a = std::clamp(chain_acceptance, 0.0, 1.0);
  const double prior = 1.0 - std::pow(1.0 - a, width);
  std::vector<double> p(static_cast<size_t>(std::max(depth, 0)), prior);
  for (int32_t d = 1; d <= depth; ++d) {
    auto it = counts_.find(Key{pool, width, d});
    const Counts c = it == counts_.end() ? Counts{} : it->second;
    p[d - 1] = std::min(kCap, (c.successes + prior_weight_ * prior) / (c.trials + prior_weight_));
  }
  return p;
}

std::vector<double> TreeAcceptance::Continuation(const std::string& pool, int32_t depth, int32_t nodes) const {
  const int32_t width = Width(depth, nodes);
  std::vector<double> c(static_cast<size_t>(std::max(depth, 0)), 1.0);
  for (int32_t d = 1; d <= depth; ++d) {
    auto it = counts_.find(Key{pool, width, d});
    if (it == counts_.end()) continue;
    c[d - 1] = (it->second.continued + prior_weight_) / (it->second.reached + prior_weight_);
  }
  return c;
}

double TreeAcceptance::ExpectedLength(const std::string& pool, int32_t depth, int32_t nodes,
                                      double chain_acceptance) const {
  const std::vector<double> p = DepthAcceptance(pool, depth, nodes, chain_acceptance);
  const std::vector<double> c = Continuation(pool, depth, nodes);
  double length = 1.0, reach = 1.0;
  for (int32_t d = 1; d <= depth; ++d) {
    reach *= (d == 1 ? 1.0 : c[d - 2]) * p[d - 1];
    length += reach;
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
