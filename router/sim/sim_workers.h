// Simulated drafter and verifier for `splitspec simulate` and router tests: they implement
// the worker interfaces with latency taken from a LatencyModel ("the hardware") on a virtual
// clock, and acceptance drawn from a per-request random process instead of real models.
//
// Acceptance process: each request draws a base rate ~ Beta(beta_a, beta_b) and a low-phase
// rate ~ Beta(low_beta_a, low_beta_b); after every verification it toggles between the high
// and the low phase with probability phase_switch_prob. Each draft token is then accepted
// with the current rate, independently, up to the first rejection. forced_rate overrides all
// of it (tests use it to change acceptance at a chosen step).
//
// Thread-safety: thread-compatible; everything runs on the simulator's one thread.
#ifndef SPLITSPEC_ROUTER_SIM_SIM_WORKERS_H_
#define SPLITSPEC_ROUTER_SIM_SIM_WORKERS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "router/clock.h"
#include "router/latency_model.h"
#include "router/worker_clients.h"

namespace splitspec::router::sim {

struct AcceptanceProcessConfig {
  double beta_a = 7.0, beta_b = 3.0;          // high phase, mean 0.7
  double low_beta_a = 2.0, low_beta_b = 8.0;  // low phase, mean 0.2
  double phase_switch_prob = 0.0;             // per verification
};

class SimWorld {
 public:
  SimWorld(AcceptanceProcessConfig config, uint64_t seed) : config_(config), rng_(seed) {}
  // Current acceptance rate of a request (creating its process on first use).
  double Rate(spec::RequestId id);
  // Draft tokens accepted out of k (then advances the request's phase process).
  int32_t Accept(spec::RequestId id, int32_t k);
  int32_t RandomToken(int32_t vocab);
  void Forget(spec::RequestId id) { requests_.erase(id); }
  void set_forced_rate(std::optional<double> rate) { forced_rate_ = rate; }

 private:
  struct Process {
    double high = 0.7, low = 0.2;
    bool low_phase = false;
  };
  double Beta(double a, double b);
  AcceptanceProcessConfig config_;
  std::mt19937_64 rng_;
  std::map<spec::RequestId, Process> requests_;
  std::optional<double> forced_rate_;
};

struct SimHardware {
  LatencyModel latency;          // what steps really cost
  int32_t total_blocks = 7500;   // A100-80G with a 7B fp16 target: ~120k KV tokens
  int32_t block_size = 16;
  int32_t vocab_size = 32000;
  int32_t max_draft_tokens = 16;
};

class SimVerifier : public VerifierClient {
 public:
  SimVerifier(const SimHardware* hw, SimWorld* world, VirtualClock* clock)
      : hw_(hw), world_(world), clock_(clock) {}
  absl::StatusOr<std::vector<spec::PrefillResult>> Prefill(
      const std::vector<spec::PrefillItem>& items) override;
  absl::StatusOr<spec::VerifyResponse> Verify(const std::vector<spec::VerifyItem>& items) override;
  absl::Status Release(const std::vector<spec::RequestId>& ids) override;
  absl::StatusOr<spec::WorkerInfo> Info() override;
  size_t live_sessions() const { return context_.size(); }

 private:
  const SimHardware* hw_;
  SimWorld* world_;
  VirtualClock* clock_;
  std::map<spec::RequestId, int64_t> context_;  // committed tokens in KV
};

class SimDrafter : public DrafterClient {
 public:
  SimDrafter(std::string pool, const SimHardware* hw, SimWorld* world, VirtualClock* clock)
      : pool_(std::move(pool)), hw_(hw), world_(world), clock_(clock) {}
  absl::StatusOr<spec::ProposeResponse> Propose(const std::vector<spec::ProposeItem>& items) override;
  absl::Status Release(const std::vector<spec::RequestId>& ids) override;
  absl::StatusOr<spec::WorkerInfo> Info() override;
  int64_t prefilled_requests() const { return prefilled_; }

 private:
  std::string pool_;
  const SimHardware* hw_;
  SimWorld* world_;
  VirtualClock* clock_;
  std::map<spec::RequestId, int64_t> known_;
  int64_t prefilled_ = 0;
};

}  // namespace splitspec::router::sim

#endif  // SPLITSPEC_ROUTER_SIM_SIM_WORKERS_H_
