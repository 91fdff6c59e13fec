// ShapeCalibration: how many tokens each proposal shape was expected to yield when a policy
// chose it, against how many it did, per drafter pool and shape ("3" = a chain of 3, "2:4" = a
// tree of 4 nodes over 2 levels). The expected-length formulas rest on estimates (a per-token
// acceptance for chains, per-depth acceptance for trees); this is where a shape whose estimate
// runs high or low shows, and the online form of the calibration table in docs/benchmarks.md.
// Sums decay (the last few hundred steps of a shape dominate); memory is bounded by the
// number of distinct shapes, which the node cap bounds.
//
// Thread-safety: thread-compatible (the router's loop thread).
#ifndef SPLITSPEC_ROUTER_SHAPE_CALIBRATION_H_
#define SPLITSPEC_ROUTER_SHAPE_CALIBRATION_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "nlohmann/json.hpp"

namespace splitspec::router {

class ShapeCalibration {
 public:
  static constexpr double kDecay = 0.995;

  static std::string ShapeName(int32_t depth, int32_t nodes);

  // One request-step: the policy expected `expected` tokens (bonus included) from the shape and
  // the step emitted `emitted`. Ignored when expected is not positive (the policy gave none).
  void Observe(const std::string& pool, int32_t depth, int32_t nodes, double expected, double emitted);
  // Observed over expected for the shape, and the decayed number of steps behind it (0: never
  // seen, ratio 1).
  std::pair<double, double> Ratio(const std::string& pool, int32_t depth, int32_t nodes) const;

  // {pool: {shape: {"expected": mean, "observed": mean, "steps": decayed count}}}
  nlohmann::json Describe() const;

 private:
  struct Sums {
    double expected = 0;
    double observed = 0;
    double steps = 0;
  };
  std::map<std::pair<std::string, std::string>, Sums> sums_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_SHAPE_CALIBRATION_H_
