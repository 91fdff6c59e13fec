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

double TreeAcceptance::ExpectedLength(const std::string& pool, int32_t depth, int32_t nodes,
                                      double chain_acceptance) const {
  double length = 1.0, reach = 1.0;
  for (double p : DepthAcceptance(pool, depth, nodes, chain_acceptance)) {
    reach *= p;
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
                   {"observations", c.trials}});
  }
  return out;
}

}  // namespace splitspec::router
