#include "router/shape_calibration.h"

#include <cmath>

namespace splitspec::router {

std::string ShapeCalibration::ShapeName(int32_t depth, int32_t nodes) {
  if (nodes <= depth) return std::to_string(depth);
  return std::to_string(depth) + ":" + std::to_string(nodes);
}

void ShapeCalibration::Observe(const std::string& pool, int32_t depth, int32_t nodes, double expected,
                               double emitted) {
  if (!(expected > 0) || !std::isfinite(expected) || !std::isfinite(emitted)) return;
  Sums& s = sums_[{pool, ShapeName(depth, nodes)}];
  s.expected = kDecay * s.expected + expected;
  s.observed = kDecay * s.observed + emitted;
  s.steps = kDecay * s.steps + 1;
}

std::pair<double, double> ShapeCalibration::Ratio(const std::string& pool, int32_t depth,
                                                  int32_t nodes) const {
  auto it = sums_.find({pool, ShapeName(depth, nodes)});
  if (it == sums_.end() || !(it->second.expected > 0)) return {1.0, 0.0};
  return {it->second.observed / it->second.expected, it->second.steps};
}

nlohmann::json ShapeCalibration::Describe() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, s] : sums_) {
    out[key.first][key.second] = {{"expected", s.expected / s.steps},
                                  {"observed", s.observed / s.steps},
                                  {"steps", s.steps}};
  }
  return out;
}

}  // namespace splitspec::router
