// Simulated workers: virtual-clock latency from the hardware's LatencyModel.
#include "router/sim/sim_workers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace splitspec::router::sim {

double SimWorld::Beta(double a, double b) {
  std::gamma_distribution<double> ga(a, 1.0), gb(b, 1.0);
  const double x = ga(rng_), y = gb(rng_);
  return x + y > 0 ? x / (x + y) : 0.5;
}

double SimWorld::Rate(spec::RequestId id) {
  if (forced_rate_) return *forced_rate_;
  auto [it, added] = requests_.try_emplace(id);
  if (added) {
    it->second.high = Beta(config_.beta_a, config_.beta_b);
    it->second.low = Beta(config_.low_beta_a, config_.low_beta_b);
  }
  return it->second.low_phase ? it->second.low : it->second.high;
}

int32_t SimWorld::Accept(spec::RequestId id, int32_t k) {
  const double rate = Rate(id);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int32_t accepted = 0;
  while (accepted < k && u(rng_) < rate) ++accepted;
  auto it = requests_.find(id);
  if (it != requests_.end() && config_.phase_switch_prob > 0 &&
      u(rng_) < config_.phase_switch_prob) {
    it->second.low_phase = !it->second.low_phase;
  }
  return accepted;
}

int32_t SimWorld::RandomToken(int32_t vocab) {
  return static_cast<int32_t>(rng_() % static_cast<uint64_t>(std::max(vocab, 1)));
}

absl::StatusOr<std::vector<spec::PrefillResult>> SimVerifier::Prefill(
    const std::vector<spec::PrefillItem>& items) {
  double tokens = 0;
  std::vector<spec::PrefillResult> out;
  for (const auto& item : items) {
    if (context_.count(item.id)) return absl::InvalidArgumentError("session exists");
    context_[item.id] = static_cast<int64_t>(item.tokens.size());
    tokens += static_cast<double>(item.tokens.size());
    out.push_back({item.id, world_->RandomToken(hw_->vocab_size), absl::OkStatus()});
  }
  // A prefill reads and writes its own prompt: context ~ batched ~ prompt tokens.
  clock_->Advance(hw_->latency.TargetSeconds(tokens, tokens) + hw_->latency.RpcSeconds());
  return out;
}

absl::StatusOr<spec::VerifyResponse> SimVerifier::Verify(
    const std::vector<spec::VerifyItem>& items) {
  spec::VerifyResponse resp;
  double n_ctx = 0, n_tok = 0;
  for (const auto& item : items) {
    auto it = context_.find(item.id);
    if (it == context_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown session ", item.id));
    }
    const int32_t k = static_cast<int32_t>(item.draft.tokens.size());
    n_ctx += static_cast<double>(it->second);
    n_tok += 1 + k;
    spec::VerifyResult r;
    r.id = item.id;
    r.accept_length = world_->Accept(item.id, k);
    r.tokens.assign(item.draft.tokens.begin(), item.draft.tokens.begin() + r.accept_length);
    r.tokens.push_back(world_->RandomToken(hw_->vocab_size));
    it->second += 1 + r.accept_length;
    resp.results.push_back(std::move(r));
  }
  resp.compute_seconds = hw_->latency.TargetSeconds(n_ctx, n_tok);
  resp.total_blocks = hw_->total_blocks;
  clock_->Advance(resp.compute_seconds + hw_->latency.RpcSeconds());
  return resp;
}

absl::Status SimVerifier::Release(const std::vector<spec::RequestId>& ids) {
  for (auto id : ids) {
    context_.erase(id);
    world_->Forget(id);
  }
  return absl::OkStatus();
}

absl::StatusOr<spec::WorkerInfo> SimVerifier::Info() {
  spec::WorkerInfo info;
  info.model_name = "simulated-target";
  info.vocab_size = hw_->vocab_size;
  info.total_blocks = info.free_blocks = hw_->total_blocks;
  info.block_size = hw_->block_size;
  info.max_draft_tokens = hw_->max_draft_tokens;
  info.live_sessions = static_cast<int32_t>(context_.size());
  return info;
}

absl::StatusOr<spec::ProposeResponse> SimDrafter::Propose(
    const std::vector<spec::ProposeItem>& items) {
  spec::ProposeResponse resp;
  const DrafterCost cost = hw_->latency.EffectiveDrafter(pool_);
  const LatencyModel::ResolvedDrafter drafter = hw_->latency.Resolve(pool_);  // its batch shape
  int32_t depth = 0;
  double first_ctx = 0, first_tok = 0;
  for (const auto& item : items) {
    if (item.known_length == 0) ++prefilled_;
    known_[item.id] = item.known_length + static_cast<int64_t>(item.new_tokens.size());
    depth = std::max(depth, item.shape.depth);
    // The first draft forward also catches up on the tokens committed since last time (the
    // whole prompt for a new request: the drafter's lazy prefill).
    first_ctx += static_cast<double>(item.known_length);
    first_tok += static_cast<double>(std::max<size_t>(item.new_tokens.size(), 1));
    spec::ProposeResult r;
    r.id = item.id;
    for (int32_t j = 0; j < item.shape.depth; ++j) {
      r.draft.tokens.push_back(world_->RandomToken(hw_->vocab_size));
      r.draft.parents.push_back(j - 1);
    }
    resp.results.push_back(std::move(r));
  }
  double seconds = 0;
  if (depth > 0) {
    if (cost.model_free) {
      seconds = cost.constant_seconds;
    } else {
      seconds = cost.forward.Predict(first_ctx, first_tok) * drafter.Shape(first_tok);
      for (int32_t s = 2; s <= depth; ++s) {
        double ctx = 0, tok = 0;
        for (const auto& item : items) {
          if (item.shape.depth < s) continue;
          ctx += static_cast<double>(known_[item.id] + s - 1);
          tok += 1;
        }
        seconds += cost.forward.Predict(ctx, tok) * drafter.Shape(tok);
      }
    }
  }
  resp.compute_seconds = seconds;
  clock_->Advance(seconds + hw_->latency.RpcSeconds());
  return resp;
}

absl::Status SimDrafter::Release(const std::vector<spec::RequestId>& ids) {
  for (auto id : ids) known_.erase(id);
  return absl::OkStatus();
}

absl::StatusOr<spec::WorkerInfo> SimDrafter::Info() {
  spec::WorkerInfo info;
  info.model_name = "simulated-" + pool_;
  info.vocab_size = hw_->vocab_size;
  info.max_draft_tokens = hw_->max_draft_tokens;
  info.live_sessions = static_cast<int32_t>(known_.size());
  return info;
}

}  // namespace splitspec::router::sim
