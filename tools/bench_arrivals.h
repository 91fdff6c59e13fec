// Arrival processes for `splitspec bench`: the open-loop Poisson schedule (exponential gaps with
// mean 1/rate from a seeded generator, so a run can be repeated exactly), and parsing of the
// `--rates` / `--concurrency` lists.
//
// Thread-safety: PoissonArrivals is a plain value, not safe for concurrent use; the functions
// are pure.
#ifndef SPLITSPEC_TOOLS_BENCH_ARRIVALS_H_
#define SPLITSPEC_TOOLS_BENCH_ARRIVALS_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace splitspec::tools::bench {

class PoissonArrivals {
 public:
  // `rate_per_s` > 0; +infinity means every request arrives at once (gap 0), as in vLLM's
  // `--request-rate inf`.
  PoissonArrivals(double rate_per_s, uint64_t seed);

  // The next inter-arrival gap in seconds.
  double NextGapSeconds();

 private:
  double rate_;
  std::mt19937_64 rng_;
};

// Arrival offsets (seconds from the start, ascending) of the requests that arrive before
// `duration_s`, capped at `max_requests` (an infinite rate would otherwise be unbounded).
std::vector<double> ArrivalSchedule(double rate_per_s, double duration_s, uint64_t seed,
                                    int64_t max_requests);

// "0.5,1,2,inf" -> {0.5, 1, 2, inf}; every rate must be > 0 and the list non-empty.
absl::StatusOr<std::vector<double>> ParseRates(absl::string_view text);
// "1,4,8" -> {1, 4, 8}; every value must be in [1, max].
absl::StatusOr<std::vector<int>> ParseConcurrencies(absl::string_view text, int max);

}  // namespace splitspec::tools::bench

#endif  // SPLITSPEC_TOOLS_BENCH_ARRIVALS_H_
