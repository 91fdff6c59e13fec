// Drafter sessions (see drafter_core.h).
#include "drafter/drafter_core.h"

#include <algorithm>
#include <chrono>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/engine/sampling/sampler.h"

namespace splitspec::drafter {

DrafterCore::DrafterCore(std::unique_ptr<Proposer> proposer, const DrafterOptions& options)
    : proposer_(std::move(proposer)), options_(options), leases_(options.session_lease_seconds) {}

absl::Status DrafterCore::CheckCaps(const spec::ProposeItem& item, int32_t new_sessions,
                                    int64_t added_tokens) const {
  auto it = histories_.find(item.id);
  const bool fresh = it == histories_.end();
  if (fresh && options_.max_sessions > 0 &&
      static_cast<int64_t>(histories_.size()) + new_sessions >= options_.max_sessions) {
    return absl::ResourceExhaustedError(absl::StrCat("request ", item.id, ": the drafter holds its maximum of ",
                                                     options_.max_sessions, " sessions"));
  }
  const int64_t before = fresh ? 0 : static_cast<int64_t>(it->second.size());
  const int64_t after = item.known_length + static_cast<int64_t>(item.new_tokens.size()) - item.assumed_tokens;
  if (options_.max_history_tokens > 0 && held_tokens_ + added_tokens + (after - before) > options_.max_history_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat("request ", item.id, ": the drafter holds its maximum of ",
                                                     options_.max_history_tokens, " history tokens"));
  }
  return absl::OkStatus();
}

absl::Status DrafterCore::CheckItem(const spec::ProposeItem& item, int32_t vocab) const {
  const spec::ProposalShape& shape = item.shape;
  if (shape.depth < 0 || shape.depth > options_.max_draft_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": k = ", shape.depth, " is outside [0, ",
                                                   options_.max_draft_tokens, "] (the drafter's --max-draft-tokens)"));
  }
  if (shape.branching < 1 || shape.max_nodes < 0 || shape.max_nodes > options_.max_draft_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": bad proposal shape (branching ",
                                                   shape.branching, ", max_nodes ", shape.max_nodes, ")"));
  }
  if (item.known_length < 0) {
    return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": negative known_length"));
  }
  for (size_t i = 0; i < item.new_tokens.size(); ++i) {
    const int32_t token = item.new_tokens[i];
    if (token < 0 || (vocab > 0 && token >= vocab)) {
      return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": new token ", i, " is ", token,
                                                     ", outside the vocabulary [0, ", vocab, ")"));
    }
  }
  if (absl::Status s = engine::ValidateSamplingParams(item.sampling); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": ", s.message()));
  }
  auto it = histories_.find(item.id);
  const size_t held = it == histories_.end() ? 0 : it->second.size();
  if (item.known_length > 0 && it == histories_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("unknown session: request ", item.id, " (known_length ",
                                                      item.known_length, "); resend with known_length 0"));
  }
  if (static_cast<size_t>(item.known_length) > held) {
    return absl::FailedPreconditionError(absl::StrCat("request ", item.id, ": known_length ", item.known_length,
                                                      " but the drafter holds ", held, " tokens"));
  }
  if (item.known_length == 0 && item.new_tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": empty history"));
  }
  return CheckHypothesis(item);
}

absl::Status DrafterCore::CheckHypothesis(const spec::ProposeItem& item) const {
  // The committed part must still end with a pending token for the draft to continue from.
  const int64_t committed = item.known_length + static_cast<int64_t>(item.new_tokens.size()) - item.assumed_tokens;
  if (item.assumed_tokens < 0 || item.assumed_tokens > static_cast<int64_t>(item.new_tokens.size()) || committed < 1) {
    return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": ", item.assumed_tokens,
                                                   " assumed tokens of ", item.new_tokens.size(),
                                                   " new tokens leave no committed history"));
  }
  if (item.alternatives < 0 || item.alternatives > item.assumed_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": ", item.alternatives,
                                                   " alternatives for ", item.assumed_tokens,
                                                   " assumed tokens (at most one per assumed token)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<spec::ProposeResponse> DrafterCore::Propose(const std::vector<spec::ProposeItem>& items) {
  const auto start = std::chrono::steady_clock::now();
  const int32_t vocab = proposer_->Info().vocab_size;
  spec::ProposeResponse response;
  response.results.resize(items.size());
  // Each item is checked on its own: a bad one gets its status, the others are drafted.
  std::vector<size_t> ready;
  std::unordered_set<spec::RequestId> seen;
  int32_t new_sessions = 0;
  int64_t added_tokens = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    response.results[i].id = items[i].id;
    if (!seen.insert(items[i].id).second) {
      response.results[i].status =
          absl::InvalidArgumentError(absl::StrCat("request ", items[i].id, " appears twice in one propose batch"));
      continue;
    }
    response.results[i].status = CheckItem(items[i], vocab);
    if (response.results[i].status.ok()) {
      response.results[i].status = CheckCaps(items[i], new_sessions, added_tokens);
    }
    if (!response.results[i].status.ok()) continue;
    ready.push_back(i);
    auto it = histories_.find(items[i].id);
    new_sessions += it == histories_.end() ? 1 : 0;
    added_tokens += items[i].known_length + static_cast<int64_t>(items[i].new_tokens.size()) -
                    items[i].assumed_tokens - (it == histories_.end() ? 0 : static_cast<int64_t>(it->second.size()));
  }

  std::vector<ProposeTask> tasks;
  tasks.reserve(ready.size());
  // The histories with their assumed tokens, for the proposer (the session keeps the committed
  // part only). Sized up front: tasks point into it.
  std::vector<std::vector<int32_t>> hypotheses(ready.size());
  const double now = Now();
  for (size_t j = 0; j < ready.size(); ++j) {
    const spec::ProposeItem& item = items[ready[j]];
    std::vector<int32_t>& history = histories_[item.id];
    held_tokens_ -= static_cast<int64_t>(history.size());
    history.resize(item.known_length);
    const auto assumed_begin = item.new_tokens.end() - item.assumed_tokens;
    history.insert(history.end(), item.new_tokens.begin(), assumed_begin);
    held_tokens_ += static_cast<int64_t>(history.size());
    leases_.Touch(item.id, now);
    ProposeTask task;
    task.id = item.id;
    task.history = &history;
    if (item.assumed_tokens > 0) {
      hypotheses[j] = history;
      hypotheses[j].insert(hypotheses[j].end(), assumed_begin, item.new_tokens.end());
      task.history = &hypotheses[j];
      task.assumed = item.assumed_tokens;
      task.alternatives = item.alternatives;
      task.alternatives_out = item.alternatives > 0 ? &response.results[ready[j]].alternatives : nullptr;
    }
    task.shape = item.shape;
    // A tree's budget defaults to depth x branching (max_nodes 0); never more than this
    // drafter sends (checked for an explicit max_nodes).
    if (task.shape.branching > 1) {
      const int64_t budget = task.shape.max_nodes > 0
                                 ? task.shape.max_nodes
                                 : static_cast<int64_t>(task.shape.depth) * task.shape.branching;
      task.shape.max_nodes = static_cast<int32_t>(std::min<int64_t>(budget, options_.max_draft_tokens));
    }
    task.sampling = item.sampling;
    tasks.push_back(task);
  }
  if (!tasks.empty()) {
    absl::StatusOr<std::vector<spec::DraftProposal>> proposals = proposer_->Propose(tasks);
    if (!proposals.ok()) return proposals.status();
    for (size_t j = 0; j < ready.size(); ++j) response.results[ready[j]].draft = std::move((*proposals)[j]);
  }
  response.compute_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return response;
}

int32_t DrafterCore::Release(const std::vector<spec::RequestId>& ids) {
  int32_t released = 0;
  for (spec::RequestId id : ids) {
    leases_.Forget(id);
    auto it = histories_.find(id);
    if (it != histories_.end()) {
      held_tokens_ -= static_cast<int64_t>(it->second.size());
      histories_.erase(it);
      ++released;
    }
    proposer_->Release(id);
  }
  return released;
}

int32_t DrafterCore::ReclaimIdle() {
  const std::vector<spec::RequestId> expired = leases_.TakeExpired(Now());
  return expired.empty() ? 0 : Release(expired);
}

spec::WorkerInfo DrafterCore::Info() const {
  const ProposerInfo proposer = proposer_->Info();
  spec::WorkerInfo info;
  info.model_name = proposer.name;
  info.vocab_size = proposer.vocab_size;
  info.free_blocks = proposer.free_blocks;
  info.total_blocks = proposer.total_blocks;
  info.block_size = proposer.block_size;
  info.max_draft_tokens = options_.max_draft_tokens;
  info.live_sessions = static_cast<int32_t>(histories_.size());
  info.held_tokens = held_tokens_;
  return info;
}

const std::vector<int32_t>* DrafterCore::History(spec::RequestId id) const {
  auto it = histories_.find(id);
  return it == histories_.end() ? nullptr : &it->second;
}

}  // namespace splitspec::drafter
