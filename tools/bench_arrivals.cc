// Poisson arrival schedule and rate-list parsing for `splitspec bench`.
#include "tools/bench_arrivals.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace splitspec::tools::bench {

PoissonArrivals::PoissonArrivals(double rate_per_s, uint64_t seed)
    : rate_(rate_per_s), rng_(seed) {}

double PoissonArrivals::NextGapSeconds() {
  if (std::isinf(rate_)) return 0.0;
  // Inverse CDF of the exponential distribution on a 53-bit uniform in [0, 1); written out
  // rather than std::exponential_distribution so the sequence for a seed does not depend on
  // the standard library's implementation.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  return -std::log1p(-u) / rate_;
}

std::vector<double> ArrivalSchedule(double rate_per_s, double duration_s, uint64_t seed,
                                    int64_t max_requests) {
  std::vector<double> times;
  PoissonArrivals arrivals(rate_per_s, seed);
  double t = 0.0;
  while (static_cast<int64_t>(times.size()) < max_requests) {
    t += arrivals.NextGapSeconds();
    if (t >= duration_s) break;
    times.push_back(t);
  }
  return times;
}

absl::StatusOr<std::vector<double>> ParseRates(absl::string_view text) {
  std::vector<double> rates;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    double rate = 0;
    if (part == "inf") {
      rate = std::numeric_limits<double>::infinity();
    } else if (!absl::SimpleAtod(part, &rate) || !std::isfinite(rate) || rate <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad request rate '", part, "' (want a number > 0 or inf)"));
    }
    rates.push_back(rate);
  }
  return rates;  // StrSplit yields at least one part, and an empty part fails above
}

absl::StatusOr<std::vector<int>> ParseConcurrencies(absl::string_view text, int max) {
  std::vector<int> values;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < 1 || value > max) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad concurrency '", part, "' (want 1..", max, ")"));
    }
    values.push_back(value);
  }
  return values;
}

}  // namespace splitspec::tools::bench
