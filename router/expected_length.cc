// Closed forms for the expected step length; see the header for the derivations.
#include "router/expected_length.h"

#include <algorithm>
#include <cmath>

namespace splitspec::router {

double ExpectedChainLength(double a, int32_t k) {
  a = std::clamp(a, 0.0, 1.0);
  k = std::max<int32_t>(k, 0);
  // Near a = 1 the closed form cancels catastrophically; the finite sum is exact and k is
  // small, so use it there.
  if (a > 0.999) {
    double sum = 1.0, term = 1.0;
    for (int32_t i = 0; i < k; ++i) {
      term *= a;
      sum += term;
    }
    return sum;
  }
  return (1.0 - std::pow(a, k + 1)) / (1.0 - a);
}

double ChainMarginalGain(double a, int32_t k) {
  a = std::clamp(a, 0.0, 1.0);
  return std::pow(a, std::max<int32_t>(k, 0) + 1);
}

namespace {
double DepthSuccess(double a, int32_t k) {
  a = std::clamp(a, 0.0, 1.0);
  return k <= 0 ? 0.0 : 1.0 - std::pow(1.0 - a, k);
}
}  // namespace

double ExpectedTreeLength(absl::Span<const double> a, absl::Span<const int32_t> k) {
  const size_t h = std::min(a.size(), k.size());
  double reach = 1.0, total = 1.0;
  for (size_t i = 0; i < h; ++i) {
    reach *= DepthSuccess(a[i], k[i]);
    total += reach;
  }
  return total;
}

double ExpectedTreeLengthByOutcome(absl::Span<const double> a, absl::Span<const int32_t> k) {
  const size_t h = std::min(a.size(), k.size());
  double reach = 1.0, total = 0.0;
  for (size_t i = 0; i <= h; ++i) {
    const double next = i < h ? DepthSuccess(a[i], k[i]) : 0.0;
    total += static_cast<double>(i + 1) * (1.0 - next) * reach;
    reach *= next;
  }
  return total;
}

int64_t TreeVerifiedTokens(absl::Span<const int32_t> k) {
  int64_t width = 1, total = 0;
  for (int32_t kj : k) {
    width *= std::max<int32_t>(kj, 0);
    total += width;
  }
  return total;
}

}  // namespace splitspec::router
