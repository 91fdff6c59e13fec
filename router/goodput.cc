// Goodput evaluation and its exact maximisation.
//
// Per-request optimisation, and why it is exact. Fix D_p, the number of draft forwards of
// each pool p (k_i <= D_p for the requests i of pool p). With the linear latency model the
// step time then splits into
//   T(k) = C0 + sum_p F_p(D_p) + sum_i c_i(k_i)
// where C0 is the target forward with every k_i = 0 plus the verify RPC, F_p(D) the fixed
// part of pool p (D * delta_p for a draft model or its constant for a model-free one, plus
// its RPC; 0 for D = 0) and c_i(k) = gamma_target * k + sum_{s=1..k} (alpha_p (ctx_i + s - 1)
// + gamma_p), plus for k >= 1 its drafter catch-up charge (goodput.h), the request's own
// marginal cost.
//
// (1) For fixed D, max_k L(k) / T(k) with L = sum_i l_i(k_i) is solved exactly by Dinkelbach's
// method: for a ratio G let F(G) = max_k [L(k) - G T(k)], which is separable: each request
// maximises l_i(k) - G c_i(k) on its own, over k in [0, D_p] by scanning them all (the
// catch-up charge makes the first increment of c_i dearer than the next, so the sum is not
// concave and stopping at the first non-positive increment would not do). Starting from
// G = L(0)/T(0), take the maximiser k' and set G' = L(k')/T(k').
// Since F(G) >= L(k) - G T(k) = 0 for the k that defined G, either F(G) = 0, and then no k
// has L/T > G (G is optimal), or L(k') - G T(k') > 0, i.e. G' > G. G strictly increases over
// a finite set of vectors, so the iteration stops, at the optimum.
// (2) The relaxed cost with D_p >= max k_i over-charges F_p when the maximum is below D_p and
// is exact when it equals D_p. Let k* be a true optimum and D* its per-pool maxima: the
// relaxed optimum at D* is >= G(k*), and its solution's true cost is <= its relaxed cost, so
// its true goodput is >= G(k*). Hence the best true goodput over all D vectors' relaxed
// solutions is the global optimum. We enumerate D over [0, max_k]^pools (falling back to a
// single shared D for all pools when that product exceeds kMaxDepthVectors).
// With the pipeline a pool's draft cost is scaled by its exposure at depth D_p (goodput.h),
// a constant for a fixed D, so (1) holds as it stands; (2) needs a pool's cost not to shrink
// as D grows, which a deeper chain's exposure need not respect, so there the result is the
// best of the enumerated candidates, each priced by the exact step time.
// tests/unit/router/goodput_test.cc checks this against brute force.
#include "router/goodput.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/container/inlined_vector.h"
#include "router/expected_length.h"

namespace splitspec::router {
namespace {
constexpr int64_t kMaxDepthVectors = 4096;
constexpr int kMaxDinkelbachIterations = 64;

// One request's best chain length for Dinkelbach ratio G: the k in [0, limit] maximising
// l(a, k) - G c(k), with c's increments from marginal_cost(s), s = 1..k. Every k is scanned:
// the catch-up charge makes the first increment of c dearer than the next, so a non-positive
// increment does not rule out a positive sum further on.
struct ChainChoice {
  int32_t k = 0;
  double gain = 0;  // l(a, k) - 1
  double cost = 0;  // c(k)
};
template <typename MarginalCost>
ChainChoice BestChain(double acceptance, int32_t limit, double ratio, MarginalCost&& marginal_cost) {
  ChainChoice best, running;
  double value = 0, best_value = 0;
  for (int32_t s = 1; s <= limit; ++s) {
    const double gain = ChainMarginalGain(acceptance, s - 1);
    const double mc = marginal_cost(s);
    value += gain - ratio * mc;
    running = {s, running.gain + gain, running.cost + mc};
    if (value > best_value) {
      best_value = value;
      best = running;
    }
  }
  return best;
}
}  // namespace

GoodputModel::GoodputModel(const LatencyModel& model, std::vector<GoodputItem> items,
                           int32_t max_k)
    : model_(model), items_(std::move(items)), max_k_(std::max<int32_t>(max_k, 0)) {
  std::map<std::string, int32_t> index;
  pool_index_.assign(items_.size(), -1);
  for (size_t i = 0; i < items_.size(); ++i) {
    if (!items_[i].speculative) continue;
    auto [it, added] = index.emplace(items_[i].pool, static_cast<int32_t>(pools_.size()));
    if (added) pools_.push_back(items_[i].pool);
    pool_index_[i] = it->second;
  }
  for (const std::string& pool : pools_) {
    pool_drafters_.push_back(model_.Resolve(pool));
    pool_costs_.push_back(model_.EffectiveDrafter(pool));
  }
  if (model_.pipeline()) ComputePipelineExposure();
}

const GoodputModel::DraftExposure& GoodputModel::Exposure(size_t pool, int32_t depth) const {
  static const DraftExposure kSerial;
  if (exposure_.empty() || depth <= 0) return kSerial;
  return exposure_[pool * static_cast<size_t>(max_k_ + 1) + static_cast<size_t>(std::min(depth, max_k_))];
}

void GoodputModel::ComputePipelineExposure() {
  const size_t stride = static_cast<size_t>(max_k_ + 1);
  exposure_.assign(pools_.size() * stride, DraftExposure{});
  const double rpc = model_.RpcSeconds();
  double all_context = 0;
  for (const GoodputItem& it : items_) all_context += it.context;
  std::vector<int32_t> ctx, ahead_ctx, depths, ahead_depths;
  for (size_t p = 0; p < pools_.size(); ++p) {
    // Drafts made ahead are priced with their own correction (LatencyModel::ResolveAhead): the
    // drafter may run slower beside the verifier than alone.
    const LatencyModel::ResolvedDrafter ahead_drafter = model_.ResolveAhead(pools_[p]);
    ctx.clear();
    std::vector<double> acceptance;
    std::vector<bool> greedy;
    for (size_t i = 0; i < items_.size(); ++i) {
      if (pool_index_[i] != static_cast<int32_t>(p)) continue;
      ctx.push_back(items_[i].context);
      acceptance.push_back(std::clamp(items_[i].acceptance, 0.0, 1.0));
      greedy.push_back(items_[i].greedy);
    }
    const double n = static_cast<double>(ctx.size());
    for (int32_t d = 1; d <= max_k_; ++d) {
      depths.assign(ctx.size(), d);
      const double linear = model_.DraftSeconds(pool_drafters_[p], ctx, depths);
      if (!(linear > 0)) continue;
      DraftExposure& e = exposure_[p * stride + static_cast<size_t>(d)];
      if (d == max_k_) continue;  // no guess past the deepest chain: nothing is drafted ahead
      depths.assign(ctx.size(), d + 1);
      const double serial = model_.DraftSeconds(pool_drafters_[p], ctx, depths);
      const double verify = model_.TargetSeconds(all_context, static_cast<double>(items_.size()) + n * d);
      // The draft made ahead first feeds the chain and its guess, then drafts the next chain,
      // and one more beside it per other outcome it covers (RouterCore::AheadDraftSeconds); it
      // is used when the hypothesis holds or, failing that, one of those does
      // (LatencyModel::DraftAheadLands, which learns greedy and sampled requests apart). As
      // the router does (RouterCore::BestDraftAhead), the pool's drafts made ahead carry their
      // alternatives or none, whichever leaves less exposed: here for the pool's requests
      // together. What is exposed: the Propose of a miss, what of the draft made ahead
      // outlasts the verify call, and what drafting beside the call adds to it
      // (LatencyModel::verify_slowdown).
      bool any_alternatives = false;
      for (size_t j = 0; j < ctx.size(); ++j) any_alternatives |= model_.draft_ahead_alternatives(greedy[j]) > 0;
      double best_hit = 0, best_exposed = 0, best_cost = INFINITY;
      for (const bool with_alternatives : {true, false}) {
        if (with_alternatives && !any_alternatives) continue;
        ahead_ctx.clear();
        double hit = 0;
        for (size_t j = 0; j < ctx.size(); ++j) {
          const int32_t alternatives =
              with_alternatives ? std::min(model_.draft_ahead_alternatives(greedy[j]), d + 1) : 0;
          ahead_ctx.insert(ahead_ctx.end(), static_cast<size_t>(1 + alternatives), ctx[j] + d + 1);
          const double hypothesis = std::pow(acceptance[j], d + 1);
          hit += model_.DraftAheadLands(hypothesis, greedy[j], alternatives > 0);
        }
        hit /= n;
        ahead_depths.assign(ahead_ctx.size(), d + 1);
        const double ahead = model_.DraftSeconds(ahead_drafter, ahead_ctx, ahead_depths, n * (d + 1));
        const double exposed_ahead = std::max(0.0, ahead - verify) + model_.verify_slowdown() * verify;
        const double cost = (1 - hit) * (serial + rpc) + exposed_ahead;
        if (cost < best_cost) {
          best_cost = cost;
          best_hit = hit;
          best_exposed = exposed_ahead;
        }
      }
      // Otherwise the chain gets no guess and drafts as without the pipeline (exposure 1).
      if (best_cost < linear + rpc) {
        e.draft = ((1 - best_hit) * serial + best_exposed) / linear;
        e.rpc = 1 - best_hit;
      }
    }
  }
}

std::vector<DrafterCost> GoodputModel::CostsAtDepths(const std::vector<int32_t>& depth) const {
  std::vector<DrafterCost> costs = pool_costs_;
  if (exposure_.empty()) return costs;
  for (size_t p = 0; p < costs.size(); ++p) {
    const double s = Exposure(p, depth[p]).draft;
    DrafterCost& c = costs[p];
    c.forward = {c.forward.alpha * s, c.forward.gamma * s, c.forward.delta * s};
    c.constant_seconds *= s;
  }
  return costs;
}

double GoodputModel::PrefixStepSeconds(size_t size, absl::Span<const int32_t> k) const {
  return PrefixStepSecondsFor(size, k, k);
}

double GoodputModel::PrefixStepSecondsFor(size_t size, absl::Span<const int32_t> k,
                                          absl::Span<const int32_t> verified) const {
  size = std::min(size, items_.size());
  double n_ctx = 0, n_tok = 0;
  for (size_t i = 0; i < size; ++i) {
    n_ctx += items_[i].context;
    n_tok += 1 + (i < verified.size() ? std::max(verified[i], 0) : 0);
  }
  double t = model_.TargetSeconds(n_ctx, n_tok) + model_.RpcSeconds();
  // Inline storage: this runs for every candidate shape of every request each step.
  absl::InlinedVector<size_t, 32> drafting;
  absl::InlinedVector<int32_t, 32> ctx, kk;
  for (size_t p = 0; p < pools_.size(); ++p) {
    drafting.clear();
    ctx.clear();
    kk.clear();
    bool tree = false;
    for (size_t i = 0; i < size; ++i) {
      if (pool_index_[i] == static_cast<int32_t>(p) && i < k.size() && k[i] > 0) {
        drafting.push_back(i);
        ctx.push_back(items_[i].context);
        kk.push_back(k[i]);
        tree = tree || (i < verified.size() && verified[i] > k[i]);
      }
    }
    if (drafting.empty()) continue;
    // With the pipeline the step waits for part of the chains' drafting only; a tree has no
    // guess to draft ahead from, so a pool drafting one is priced as serial.
    const DraftExposure& e = tree ? Exposure(p, 0) : Exposure(p, *std::max_element(kk.begin(), kk.end()));
    t += model_.DraftSeconds(pool_drafters_[p], ctx, kk) * e.draft + model_.RpcSeconds() * e.rpc;
    for (size_t i : drafting) t += CatchUpSeconds(i, pool_costs_[p]) * e.draft;
  }
  return t;
}

double ChargedCatchUpTokens(const GoodputItem& item) {
  const int32_t tokens = std::max(item.draft_catch_up, 0);
  const int32_t in_full = std::min(tokens, kCatchUpChargedInFull);
  const double steps_left =
      item.remaining_tokens > 0 ? std::max(1.0, item.remaining_tokens / (1.0 + item.acceptance)) : 1.0;
  return in_full + (tokens - in_full) / steps_left;
}

double GoodputModel::CatchUpSeconds(size_t i, const DrafterCost& c) const {
  if (c.model_free) return 0.0;
  return c.forward.gamma * ChargedCatchUpTokens(items_[i]);
}

double GoodputModel::MarginalCost(size_t i, int32_t s, const ForwardCoefficients& target,
                                  const std::vector<DrafterCost>& costs) const {
  const DrafterCost& c = costs[pool_index_[i]];
  double seconds = target.gamma;
  if (!c.model_free) seconds += c.forward.alpha * (items_[i].context + s - 1) + c.forward.gamma;
  if (s == 1) seconds += CatchUpSeconds(i, c);
  return seconds;
}

double GoodputModel::StepSeconds(absl::Span<const int32_t> k) const {
  return PrefixStepSeconds(items_.size(), k);
}

double GoodputModel::ExpectedTokens(absl::Span<const int32_t> k) const {
  double total = 0;
  for (size_t i = 0; i < items_.size(); ++i) {
    total += ExpectedChainLength(items_[i].acceptance, i < k.size() ? k[i] : 0);
  }
  return total;
}

double GoodputModel::Goodput(absl::Span<const int32_t> k) const {
  return PrefixGoodput(items_.size(), k);
}

double GoodputModel::PrefixGoodput(size_t size, absl::Span<const int32_t> k) const {
  size = std::min(size, items_.size());
  double tokens = 0;
  for (size_t i = 0; i < size; ++i) {
    tokens += ExpectedChainLength(items_[i].acceptance, i < k.size() ? k[i] : 0);
  }
  const double t = PrefixStepSeconds(size, k);
  return t > 0 ? tokens / t : 0.0;
}

std::vector<int32_t> GoodputModel::BestUniform() const {
  std::vector<int32_t> best(items_.size(), 0);
  double best_goodput = Goodput(best);
  for (int32_t k = 1; k <= max_k_; ++k) {
    std::vector<int32_t> cand(items_.size(), 0);
    for (size_t i = 0; i < items_.size(); ++i) cand[i] = items_[i].speculative ? k : 0;
    const double g = Goodput(cand);
    if (g > best_goodput * (1 + 1e-12)) {
      best_goodput = g;
      best = cand;
    }
  }
  return best;
}

std::vector<int32_t> GoodputModel::SolveForDepths(const std::vector<int32_t>& depth) const {
  const ForwardCoefficients target = model_.EffectiveTarget();
  const double rpc = model_.RpcSeconds();
  const std::vector<DrafterCost> costs = CostsAtDepths(depth);

  double c0 = target.delta + rpc;
  for (const GoodputItem& it : items_) c0 += target.alpha * it.context + target.gamma;
  for (size_t p = 0; p < pools_.size(); ++p) {
    if (depth[p] == 0) continue;
    c0 += rpc * Exposure(p, depth[p]).rpc +
          (costs[p].model_free ? costs[p].constant_seconds : depth[p] * costs[p].forward.delta);
  }

  std::vector<int32_t> k(items_.size(), 0);
  double ratio = ExpectedTokens(k) / c0;
  for (int iter = 0; iter < kMaxDinkelbachIterations; ++iter) {
    std::vector<int32_t> next(items_.size(), 0);
    double tokens = 0, cost = c0;
    for (size_t i = 0; i < items_.size(); ++i) {
      tokens += 1;
      const int32_t limit = pool_index_[i] < 0 ? 0 : depth[pool_index_[i]];
      const ChainChoice c =
          BestChain(items_[i].acceptance, limit, ratio, [&](int32_t s) { return MarginalCost(i, s, target, costs); });
      next[i] = c.k;
      tokens += c.gain;
      cost += c.cost;
    }
    const double next_ratio = tokens / cost;
    if (!(next_ratio > ratio * (1 + 1e-12))) break;
    ratio = next_ratio;
    k = std::move(next);
  }
  return k;
}

template <typename F>
void GoodputModel::ForEachDepthVector(F&& f) const {
  const size_t n_pools = pools_.size();
  int64_t vectors = 1;
  for (size_t p = 0; p < n_pools && vectors <= kMaxDepthVectors; ++p) vectors *= max_k_ + 1;
  if (vectors > kMaxDepthVectors) {
    for (int32_t d = 1; d <= max_k_; ++d) f(std::vector<int32_t>(n_pools, d));
    return;
  }
  std::vector<int32_t> depth(n_pools, 0);
  while (true) {
    f(depth);
    size_t p = 0;
    while (p < n_pools && depth[p] == max_k_) depth[p++] = 0;
    if (p == n_pools) break;
    ++depth[p];
  }
}

std::vector<int32_t> GoodputModel::BestPerRequest() const {
  std::vector<int32_t> best(items_.size(), 0);
  double best_goodput = Goodput(best);
  if (pools_.empty() || max_k_ == 0) return best;
  // The solver's costs are the linear model's; where the target's or a drafter's batch shape
  // bends the forward's cost (flat, then rising), the uniform candidates, priced exactly, are
  // the safety net.
  {
    std::vector<int32_t> uniform = BestUniform();
    const double g = Goodput(uniform);
    if (g > best_goodput * (1 + 1e-12)) {
      best_goodput = g;
      best = std::move(uniform);
    }
  }
  ForEachDepthVector([&](const std::vector<int32_t>& depth) {
    std::vector<int32_t> k = SolveForDepths(depth);
    const double g = Goodput(k);
    if (g > best_goodput * (1 + 1e-12)) {
      best_goodput = g;
      best = std::move(k);
    }
  });
  return best;
}

// Candidate batches. A candidate is a prefix size m and a k vector over items[0, m).
//
// Uniform k: for each x in [0, max_k], one pass over m accumulates the prefix's expected
// tokens and step time (the drafting by the linear decomposition above, with every
// speculative request of the prefix at depth x, so each pool that drafts pays its fixed part
// once, times the pool's batch shape at its drafting count; the target's forward as the
// latency model predicts it, batch shape included), giving
// every (m, x) in O(n max_k^2) instead of O(n^2 max_k) through StepSeconds. Per prefix the
// smallest of equally good x wins (as BestUniform), then the longest of equally good prefixes.
//
// Per request: the proof above carries over with the prefix as one more choice. For a fixed
// depth vector D the relaxed step time of (m, k) is C_D + sum_{i<m} (b_i + c_i(k_i)), with
// C_D = delta + rpc + sum_p F_p(D_p) (charged whether or not the prefix uses pool p: an
// over-charge, exact at the optimum's own D as in (2)) and b_i = alpha ctx_i + gamma the
// request's k = 0 cost. Dinkelbach's F(G) = max over m and k of [L - G T] is still
// separable: each request's best k for G as before, then the best m is the largest prefix sum
// of (l_i - G (b_i + c_i)), an O(n) scan. The same fixed-point argument (a finite set of
// candidates, G strictly increasing) makes it exact, and (2) makes the best over D global.
GoodputModel::Prefix GoodputModel::BestUniformPrefix(int32_t min_size) const {
  const int32_t n = static_cast<int32_t>(items_.size());
  const double rpc = model_.RpcSeconds();
  std::vector<double> best_g(n + 1, -1);
  std::vector<int32_t> best_x(n + 1, 0);
  for (int32_t x = 0; x <= max_k_; ++x) {
    const std::vector<DrafterCost> costs = CostsAtDepths(std::vector<int32_t>(pools_.size(), x));
    // The target's forward as the model predicts it (its batch shape and residual included);
    // RPCs and catch-up charges accumulate in `time`, each pool's draft forwards on its line in
    // `draft_line` (every drafting request of a uniform step takes part in all x forwards, so
    // the pool's batch shape at its count of them prices all of them).
    double tokens = 0, time = rpc, n_ctx = 0, n_tok = 0;
    std::vector<double> draft_line(pools_.size(), 0);
    std::vector<int32_t> drafting(pools_.size(), 0);
    for (int32_t m = 1; m <= n; ++m) {
      const GoodputItem& it = items_[m - 1];
      const int32_t p = pool_index_[m - 1];
      const int32_t k = p >= 0 ? x : 0;
      tokens += ExpectedChainLength(it.acceptance, k);
      n_ctx += it.context;
      n_tok += 1 + k;
      if (k > 0) {
        const DrafterCost& c = costs[p];
        if (drafting[p]++ == 0) {
          time += rpc * Exposure(p, k).rpc + (c.model_free ? c.constant_seconds : 0.0);
          if (!c.model_free) draft_line[p] += k * c.forward.delta;
        }
        if (!c.model_free) {
          for (int32_t s = 1; s <= k; ++s) {
            draft_line[p] += c.forward.alpha * (it.context + s - 1) + c.forward.gamma;
          }
        }
        time += CatchUpSeconds(m - 1, c);
      }
      double step = time + model_.TargetSeconds(n_ctx, n_tok);
      for (size_t q = 0; q < pools_.size(); ++q) {
        if (drafting[q] > 0) step += draft_line[q] * pool_drafters_[q].Shape(drafting[q]);
      }
      const double g = step > 0 ? tokens / step : 0.0;
      if (best_g[m] < 0 || g > best_g[m] * (1 + 1e-12)) {
        best_g[m] = g;
        best_x[m] = x;
      }
    }
  }
  Prefix best;
  best.k.assign(items_.size(), 0);
  for (int32_t m = n; m >= min_size; --m) {
    if (best.size == 0 || best_g[m] > best.goodput * (1 + 1e-9)) {
      best.size = m;
      best.goodput = best_g[m];
    }
  }
  for (int32_t i = 0; i < best.size; ++i) best.k[i] = pool_index_[i] >= 0 ? best_x[best.size] : 0;
  best.goodput = PrefixGoodput(best.size, best.k);  // the exact figure for the report
  return best;
}

int32_t GoodputModel::SolvePrefixForDepths(const std::vector<int32_t>& depth, int32_t min_size,
                                           std::vector<int32_t>* k) const {
  const ForwardCoefficients target = model_.EffectiveTarget();
  const double rpc = model_.RpcSeconds();
  const std::vector<DrafterCost> costs = CostsAtDepths(depth);
  double fixed = target.delta + rpc;
  for (size_t p = 0; p < pools_.size(); ++p) {
    if (depth[p] == 0) continue;
    fixed += rpc * Exposure(p, depth[p]).rpc +
             (costs[p].model_free ? costs[p].constant_seconds : depth[p] * costs[p].forward.delta);
  }
  const size_t n = items_.size();
  // Start from the whole batch at k = 0.
  int32_t size = static_cast<int32_t>(n);
  k->assign(n, 0);
  double time = fixed;
  for (const GoodputItem& it : items_) time += target.alpha * it.context + target.gamma;
  if (!(time > 0)) return size;
  double ratio = static_cast<double>(n) / time;
  std::vector<int32_t> next(n);
  std::vector<double> item_tokens(n), item_cost(n);
  for (int iter = 0; iter < kMaxDinkelbachIterations; ++iter) {
    for (size_t i = 0; i < n; ++i) {
      next[i] = 0;
      item_tokens[i] = 1;
      item_cost[i] = target.alpha * items_[i].context + target.gamma;
      const int32_t limit = pool_index_[i] < 0 ? 0 : depth[pool_index_[i]];
      const ChainChoice c =
          BestChain(items_[i].acceptance, limit, ratio, [&](int32_t s) { return MarginalCost(i, s, target, costs); });
      next[i] = c.k;
      item_tokens[i] += c.gain;
      item_cost[i] += c.cost;
    }
    // The best prefix for this ratio; >= keeps the longest of equal ones.
    double acc = 0, best_value = 0;
    int32_t m_best = 0;
    for (size_t m = 1; m <= n; ++m) {
      acc += item_tokens[m - 1] - ratio * item_cost[m - 1];
      if (static_cast<int32_t>(m) >= min_size && (m_best == 0 || acc >= best_value)) {
        best_value = acc;
        m_best = static_cast<int32_t>(m);
      }
    }
    double tokens = 0, cost = fixed;
    for (int32_t i = 0; i < m_best; ++i) {
      tokens += item_tokens[i];
      cost += item_cost[i];
    }
    const double next_ratio = tokens / cost;
    if (!(next_ratio > ratio * (1 + 1e-12))) break;
    ratio = next_ratio;
    size = m_best;
    for (size_t i = 0; i < n; ++i) (*k)[i] = static_cast<int32_t>(i) < m_best ? next[i] : 0;
  }
  return size;
}

GoodputModel::Prefix GoodputModel::BestPerRequestPrefix(int32_t min_size) const {
  Prefix best;
  auto consider = [&](const std::vector<int32_t>& depth) {
    std::vector<int32_t> k;
    const int32_t size = SolvePrefixForDepths(depth, min_size, &k);
    const double g = PrefixGoodput(size, k);
    if (best.size == 0 || g > best.goodput * (1 + 1e-12) ||
        (size > best.size && g >= best.goodput * (1 - 1e-12))) {
      best.size = size;
      best.k = std::move(k);
      best.goodput = g;
    }
  };
  consider(std::vector<int32_t>(pools_.size(), 0));  // k = 0 everywhere
  if (!pools_.empty() && max_k_ > 0) ForEachDepthVector(consider);
  // As in BestPerRequest: the uniform candidates, priced exactly.
  Prefix uniform = BestUniformPrefix(min_size);
  if (uniform.goodput > best.goodput * (1 + 1e-12)) best = std::move(uniform);
  return best;
}

GoodputModel::Prefix GoodputModel::BestPrefix(int32_t min_size, bool per_request) const {
  if (items_.empty()) return Prefix{};
  min_size = std::clamp<int32_t>(min_size, 1, static_cast<int32_t>(items_.size()));
  return per_request ? BestPerRequestPrefix(min_size) : BestUniformPrefix(min_size);
}

}  // namespace splitspec::router
