// The measurement half of `splitspec profile`: runs a running verifier and drafters over a grid
// of batch sizes, context lengths and draft depths and collects forward-time samples in the
// latency model's features (see cmd_profile.cc for how each call maps onto them).
#ifndef SPLITSPEC_TOOLS_PROFILE_GRID_H_
#define SPLITSPEC_TOOLS_PROFILE_GRID_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/engine/sampling/sampler.h"
#include "common/rpc/worker_clients.h"
#include "common/spec/worker_api.h"
#include "router/latency_model.h"

namespace splitspec::tools {

struct Grid {
  std::vector<int32_t> batch_sizes;
  std::vector<int32_t> contexts;
  std::vector<int32_t> depths;  // draft nodes per request; the drafter skips 0
  int32_t repeats = 5;
};

// A drafter being profiled: its client, what it reported, and what was measured on it.
struct DrafterUnderTest {
  std::string pool;
  std::string address;
  std::unique_ptr<rpc::DrafterClient> client;
  spec::WorkerInfo info;
  std::vector<router::ForwardSample> samples;  // per-forward samples (draft models)
  std::vector<double> propose_seconds;         // every measured Propose
  // Per request of the current cell: committed tokens the drafter holds (0 = none yet).
  std::vector<size_t> known;
};

class ProfileProgressBar;

// Runs the grid. Per (batch, context) cell: fresh sessions are prefilled on the verifier, and
// for each depth a verify step and then a Propose on every drafter are measured, each grid
// point keeping the fastest of its repeats (interference only ever adds time). Sessions are
// released whatever happens. Not thread-safe.
class Profiler {
 public:
  Profiler(rpc::VerifierClient& verifier, const spec::WorkerInfo& verifier_info,
           std::vector<DrafterUnderTest>& drafters, const Grid& grid, uint64_t seed);

  // Runs the whole grid; cells that do not fit a worker's free KV blocks are skipped (see
  // skipped()). An RPC error stops it.
  absl::Status Run();

  const std::vector<router::ForwardSample>& target_samples() const { return target_samples_; }
  const std::vector<double>& rpc_overheads() const { return rpc_overheads_; }
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  int StepsPerCell() const;
  int Steps() const;
  static bool Fits(const spec::WorkerInfo& info, int32_t batch, int64_t per_request);
  absl::Status RunCell(int32_t batch, int32_t context, ProfileProgressBar& bar, int& done);
  absl::Status MeasureVerify(const std::vector<spec::RequestId>& ids, int32_t k,
                             std::vector<std::vector<int32_t>>& histories);
  absl::Status MeasurePropose(DrafterUnderTest& d, const std::vector<spec::RequestId>& ids, int32_t k,
                              const std::vector<std::vector<int32_t>>& histories);
  int32_t RandomToken(int32_t vocab);

  rpc::VerifierClient& verifier_;
  spec::WorkerInfo verifier_info_;
  std::vector<DrafterUnderTest>& drafters_;
  Grid grid_;
  engine::Rng rng_;
  uint64_t next_id_ = 0;
  std::vector<router::ForwardSample> target_samples_;
  std::vector<double> rpc_overheads_;
  std::vector<std::string> skipped_;
};

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_PROFILE_GRID_H_
