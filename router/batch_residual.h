// BatchResidual: what the linear latency model misses as a function of the tokens a forward
// feeds. T = alpha * n_context + gamma * n_batched + delta is linear in n_batched, but a real
// forward is not: a CPU matmul runs tokens in tiles (a 7-token forward pays for a 6-token tile
// and a 1-token one), a GPU is flat until its tensor cores fill. Fitted over the step sizes a
// router sees most (chains of 1-6 tokens at one client), the line underestimates a 17-token
// tree by ~40% on a 2-core CPU, and a policy comparing a tree with a chain then picks the tree.
//
// The residual is learnt per batch size: for each observed step, log(observed / predicted) by
// the current linear fit, averaged per bucket of n_batched (exact sizes up to 32, then 1/8th of
// an octave wide; bounded memory whatever the load). Factor(n) interpolates linearly between
// the nearest learnt buckets either side of n, and holds the end value beyond them, so an
// unseen 13-token forward between a learnt 5 and a learnt 17 is priced in between (no bucket
// must be explored one by one) and a model that is exactly linear gets a factor of 1.
//
// Thread-safety: thread-compatible (the router's loop thread).
#ifndef SPLITSPEC_ROUTER_BATCH_RESIDUAL_H_
#define SPLITSPEC_ROUTER_BATCH_RESIDUAL_H_

#include <cstdint>
#include <map>

#include "nlohmann/json.hpp"

namespace splitspec::router {

class BatchResidual {
 public:
  // A bucket enters Factor() after this many observations; each later one moves its mean by at
  // least 1/kMemory (an exponential average once it has seen kMemory steps), so a machine that
  // changes is followed.
  static constexpr int32_t kMinObservations = 2;
  static constexpr int32_t kMemory = 32;

  // One step: the linear model predicted `predicted` seconds for `n_batched` fed tokens and it
  // took `observed`. Ignored when either is not a positive finite number.
  void Observe(double n_batched, double predicted, double observed);
  // Multiplier for the linear prediction of a forward of `n_batched` tokens; 1 before any
  // bucket is learnt.
  double Factor(double n_batched) const;
  void Clear() { cells_.clear(); }
  // Sets the bucket holding `n_batched` to `factor` as if it had been learnt over kMemory steps
  // (a profiled shape, router/latency_model.h). Ignored unless factor is positive and finite.
  void Set(double n_batched, double factor);
  bool empty() const { return cells_.empty(); }

  // {"<first size of bucket>": {"factor": f, "steps": n}, ...} for /server_info.
  nlohmann::json Describe() const;

 private:
  struct Cell {
    double mean_log_ratio = 0;
    int64_t steps = 0;
  };
  // Smallest n_batched of the bucket holding n (its key, and where it sits when interpolating).
  static int32_t BucketStart(double n_batched);

  std::map<int32_t, Cell> cells_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_BATCH_RESIDUAL_H_
