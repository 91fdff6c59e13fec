// Per-depth acceptance of draft trees, estimated online from tree outcomes, and the expected
// tokens a tree shape yields.
//
// A tree step that accepted m nodes tells, for depths 1..m, that some node was accepted there
// (a success at each), and, when the last accepted node (or the root) still had children,
// that none of them was (a failure at depth m + 1); a path that ran out of tree says nothing
// about the depth below. p_d = P(some node accepted at depth d | the path reached depth d - 1
// and the tree continues there) is the decayed success share at depth d, with a prior from
// the chain acceptance a of the same requests: 1 - (1 - a)^w for a tree of width w (what w
// independent candidates per depth would give), worth `prior_weight` observations. Estimates
// are kept per drafter pool and per width w = ceil(nodes / depth) (clamped to [2, kMaxWidth]):
// a wider tree catches more at every depth.
//
// A drafter's tree is not full: an accepted node at depth d has children only if it was
// expanded. c_d, the share of steps accepted at depth d whose node there had children, is
// estimated from the same outcomes (c_0 = 1: the root always has children; prior 1).
// The expected tokens of a step with depth D: l = 1 + sum_{i=1..D} prod_{j<=i} c_{j-1} p_j
// (the accepted path reaches depth i with that probability; the bonus token adds 1), the form
// of ExpectedTreeLength (router/expected_length.h) with c_{j-1} p_j in place of
// 1 - (1 - a_j)^(k_j).
//
// Thread-safety: thread-compatible (the router's loop thread).
#ifndef SPLITSPEC_ROUTER_TREE_ACCEPTANCE_H_
#define SPLITSPEC_ROUTER_TREE_ACCEPTANCE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "nlohmann/json.hpp"

namespace splitspec::router {

class TreeAcceptance {
 public:
  static constexpr int32_t kMaxWidth = 8;
  static constexpr double kCap = 0.98;

  // `decay` multiplies a depth's counts before each new observation of it (0.98: the last
  // ~50 observations dominate).
  explicit TreeAcceptance(double decay = 0.98, double prior_weight = 4.0)
      : decay_(decay), prior_weight_(prior_weight) {}

  static int32_t Width(int32_t depth, int32_t nodes);

  // One tree step: `accepted` nodes accepted along the path; `path_continued` = the last
  // accepted node (or the root when none) had children, so a rejection ended the step.
  void Observe(const std::string& pool, int32_t depth, int32_t nodes, int32_t accepted, bool path_continued);

  // p_d for d = 1..depth.
  std::vector<double> DepthAcceptance(const std::string& pool, int32_t depth, int32_t nodes,
                                      double chain_acceptance) const;
  // c_d for d = 1..depth (the chance the path goes on below an accepted node at depth d).
  std::vector<double> Continuation(const std::string& pool, int32_t depth, int32_t nodes) const;
  // Expected tokens of the step, bonus included.
  double ExpectedLength(const std::string& pool, int32_t depth, int32_t nodes, double chain_acceptance) const;

  int64_t observations() const { return observations_; }
  // Per pool and width: observed p_d and the counts behind them (for /server_info).
  nlohmann::json Describe() const;

 private:
  struct Counts {
    double successes = 0;
    double trials = 0;
    double reached = 0;    // steps whose path was accepted down to this depth
    double continued = 0;  // of those, the ones whose node here had children
  };
  using Key = std::tuple<std::string, int32_t, int32_t>;  // pool, width, depth
  // The counts at one depth, nullptr when none were observed. Looked up by a view of the pool's
  // name: smartspec prices every tree shape of every request each step, and copying the name
  // into a key for each depth was much of that.
  const Counts* Find(std::string_view pool, int32_t width, int32_t depth) const;
  // p_d from the counts at depth d (nullptr: none) and the prior from the chain acceptance.
  double DepthAcceptanceFrom(const Counts* counts, double prior) const;
  // c_d from the counts at depth d (nullptr: none).
  double ContinuationFrom(const Counts* counts) const;

  double decay_;
  double prior_weight_;
  std::map<Key, Counts, std::less<>> counts_;
  int64_t observations_ = 0;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_TREE_ACCEPTANCE_H_
