// Verifier core (see verifier_core.h).
#include "verifier/verifier_core.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/spec/draft_tree.h"
#include "common/spec/verify.h"

namespace splitspec::verifier {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string BaseName(const std::string& path) {
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const size_t slash = trimmed.rfind('/');
  return slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
}

// The draft tree of a proposal, validated against the vocabulary and node budget. Dense
// per-node draft probabilities (n_nodes * vocab) become the sparse form DraftTree keeps.
absl::StatusOr<spec::DraftTree> BuildTree(const spec::DraftProposal& draft, int32_t vocab, int32_t max_nodes) {
  spec::DraftTreeLimits limits;
  limits.vocab_size = vocab;
  limits.max_nodes = max_nodes;
  if (draft.tokens.size() > static_cast<size_t>(max_nodes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft has ", draft.tokens.size(), " nodes; this verifier accepts at most ", max_nodes));
  }
  std::vector<spec::DraftDistribution> dists;
  if (!draft.probs.empty()) {
    if (draft.probs.size() != draft.tokens.size() * static_cast<size_t>(vocab)) {
      return absl::InvalidArgumentError(absl::StrCat("draft probs has ", draft.probs.size(),
                                                     " values; expected nodes * vocab = ",
                                                     draft.tokens.size() * static_cast<size_t>(vocab)));
    }
    // Dropping NaN or negative entries would silently change the acceptance test.
    for (size_t i = 0; i < draft.probs.size(); ++i) {
      const float p = draft.probs[i];
      if (!(p >= 0.0f) || std::isinf(p)) {
        return absl::InvalidArgumentError(absl::StrCat("draft probability ", i, " is ", p,
                                                       "; every q must be finite and >= 0"));
      }
    }
    for (size_t i = 0; i < draft.tokens.size(); ++i) {
      dists.push_back(spec::DraftDistribution::FromDense(
          absl::MakeConstSpan(draft.probs).subspan(i * vocab, vocab)));
    }
  }
  return spec::DraftTree::Create(draft.tokens, draft.parents, std::move(dists), limits);
}

absl::Status CheckOptions(const VerifierOptions& options) {
  if (options.kv_blocks <= 0 || options.block_size <= 0) {
    return absl::InvalidArgumentError("kv_blocks and block_size must be positive");
  }
  if (options.max_context_tokens < 0) return absl::InvalidArgumentError("max_context_tokens must be >= 0");
  if (options.max_draft_tokens < 0) return absl::InvalidArgumentError("max_draft_tokens must be >= 0");
  if (options.tp_size < 1) return absl::InvalidArgumentError(absl::StrCat("tp_size must be >= 1, got ", options.tp_size));
  return absl::OkStatus();
}

ReplicaOptions ToReplicaOptions(const VerifierOptions& options) {
  ReplicaOptions replica;
  replica.model_dir = options.model_dir;
  replica.device = options.device;
  replica.quantize = options.quantize;
  replica.n_threads = options.n_threads;
  if (options.tp_size > 1 && replica.n_threads == 0) {
    // Ranks as threads share the cores: split them rather than oversubscribe.
    replica.n_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / options.tp_size);
  }
  replica.kv_blocks = options.kv_blocks;
  replica.block_size = options.block_size;
  replica.kv_dtype = options.kv_dtype;
  replica.tp_size = options.tp_size;
  return replica;
}

}  // namespace

absl::StatusOr<std::unique_ptr<VerifierCore>> VerifierCore::Create(const VerifierOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  std::unique_ptr<VerifierCore> core(new VerifierCore(options));
  if (options.tp_size > 1) {
    absl::StatusOr<std::unique_ptr<InProcessTpGroup>> group =
        InProcessTpGroup::Start(ToReplicaOptions(options), options.step_observer);
    if (!group.ok()) return group.status();
    core->group_ = std::move(*group);
    core->leader_ = std::make_unique<StepLeader>(core->group_->rank0(), &core->group_->rank0_channel(),
                                                 options.step_observer);
    return core;
  }
  absl::StatusOr<std::unique_ptr<VerifierReplica>> replica = VerifierReplica::Create(ToReplicaOptions(options), nullptr);
  if (!replica.ok()) return replica.status();
  core->replica_ = std::move(*replica);
  core->leader_ = std::make_unique<StepLeader>(*core->replica_, nullptr, options.step_observer);
  return core;
}

absl::StatusOr<std::unique_ptr<VerifierCore>> VerifierCore::CreateRank0(const VerifierOptions& options,
                                                                        std::unique_ptr<engine::Communicator> comm,
                                                                        std::unique_ptr<VerifierReplica> replica) {
  if (comm == nullptr || replica == nullptr || comm->rank() != 0 || replica->options().tp_rank != 0 ||
      comm->size() != replica->options().tp_size) {
    return absl::InvalidArgumentError("CreateRank0 needs rank 0's communicator and replica of one group");
  }
  if (absl::Status s = CheckOptions(options); !s.ok()) {
    // The other ranks already wait for the first step: release them.
    StepChannel channel(replica->backend(), *comm);
    if (replica->BindCallingThread().ok()) channel.Send(StepMessage{StepKind::kShutdown, {}, {}, {}}).IgnoreError();
    return s;
  }
  VerifierOptions effective = options;
  effective.device = replica->options().device;
  effective.tp_size = replica->options().tp_size;
  effective.n_threads = replica->options().n_threads;
  std::unique_ptr<VerifierCore> core(new VerifierCore(effective));
  core->comm_ = std::move(comm);
  core->replica_ = std::move(replica);
  core->channel_ = std::make_unique<StepChannel>(core->replica_->backend(), *core->comm_);
  core->leader_ = std::make_unique<StepLeader>(*core->replica_, core->channel_.get(), options.step_observer);
  return core;
}

VerifierCore::VerifierCore(const VerifierOptions& options)
    : options_(options), model_name_(BaseName(options.model_dir)), leases_(options.session_lease_seconds) {}

VerifierCore::~VerifierCore() {
  if (leader_ != nullptr) {
    const absl::Status stopped = leader_->Shutdown();
    if (!stopped.ok()) {
      std::fprintf(stderr, "splitspec-verifier: stopping the tensor-parallel ranks: %s\n",
                   std::string(stopped.message()).c_str());
    }
  }
  leader_.reset();
  group_.reset();  // joins the follower threads
  channel_.reset();
  replica_.reset();
  comm_.reset();
}

int32_t VerifierCore::vocab_size() const { return config().vocab_size; }

int32_t VerifierCore::MaxContext() const {
  const int32_t model = config().max_position_embeddings;
  return options_.max_context_tokens > 0 ? std::min(options_.max_context_tokens, model) : model;
}

absl::Status VerifierCore::CheckTokens(const std::vector<int32_t>& tokens, const char* what,
                                       spec::RequestId id) const {
  const int32_t vocab = vocab_size();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("request ", id, ": ", what, " token ", i, " is ", tokens[i],
                                                     ", outside the vocabulary [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

int32_t VerifierCore::NextToken(Session& session, const float* logits) const {
  return engine::SampleToken(absl::MakeConstSpan(logits, vocab_size()), session.sampling, *session.rng);
}

absl::Status VerifierCore::CheckPrefillItem(const spec::PrefillItem& item) const {
  const int32_t max_positions = MaxContext();
  if (sessions_.count(item.id)) {
    return absl::AlreadyExistsError(absl::StrCat("request ", item.id, " already has a session"));
  }
  if (item.tokens.empty()) return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": empty prompt"));
  if (static_cast<int64_t>(item.tokens.size()) >= max_positions) {
    return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": prompt of ", item.tokens.size(),
                                                   " tokens leaves no room in the model's context of ",
                                                   max_positions));
  }
  if (absl::Status s = CheckTokens(item.tokens, "prompt", item.id); !s.ok()) return s;
  if (absl::Status s = engine::ValidateSamplingParams(item.sampling); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<spec::PrefillResult>> VerifierCore::Prefill(const std::vector<spec::PrefillItem>& items) {
  // Each item is checked on its own: a bad one gets its status, the others run.
  std::vector<spec::PrefillResult> results(items.size());
  std::vector<size_t> ready;
  std::unordered_set<spec::RequestId> seen;
  for (size_t i = 0; i < items.size(); ++i) {
    results[i].id = items[i].id;
    if (!seen.insert(items[i].id).second) {
      results[i].status =
          absl::InvalidArgumentError(absl::StrCat("request ", items[i].id, " appears twice in one prefill"));
      continue;
    }
    results[i].status = CheckPrefillItem(items[i]);
    if (results[i].status.ok()) ready.push_back(i);
  }
  if (ready.empty()) return results;
  // The session cap counts this batch's new sessions too, first come first served.
  if (options_.max_sessions > 0) {
    std::vector<size_t> within;
    for (size_t i : ready) {
      if (static_cast<int64_t>(sessions_.size() + within.size()) < options_.max_sessions) {
        within.push_back(i);
      } else {
        results[i].status = absl::ResourceExhaustedError(absl::StrCat(
            "request ", items[i].id, ": the verifier holds its maximum of ", options_.max_sessions, " sessions"));
      }
    }
    ready.swap(within);
    if (ready.empty()) return results;
  }

  std::vector<engine::SequenceStep> steps;
  steps.reserve(ready.size());
  for (size_t i : ready) {
    engine::SequenceStep step;
    step.seq = items[i].id;
    step.tokens = items[i].tokens;
    step.logit_nodes = {static_cast<int32_t>(items[i].tokens.size()) - 1};
    steps.push_back(std::move(step));
  }
  engine::ForwardResult forward;
  if (absl::Status s = leader_->BeginPrefill(steps, &forward); !s.ok()) return s;
  std::vector<Session> fresh(ready.size());
  for (size_t j = 0; j < ready.size(); ++j) {
    const spec::PrefillItem& item = items[ready[j]];
    fresh[j].sampling = item.sampling;
    fresh[j].rng = std::make_unique<engine::Rng>(item.sampling.seed);
    fresh[j].pending = NextToken(fresh[j], forward.Row(static_cast<int64_t>(j)));
  }
  // Sessions exist on rank 0 only; the other ranks keep the prefilled KV.
  if (absl::Status s = leader_->Commit({}); !s.ok()) return s;  // a broken group: nothing kept
  std::vector<engine::SeqId> unusable;
  const double now = Now();
  for (size_t j = 0; j < ready.size(); ++j) {
    spec::PrefillResult& result = results[ready[j]];
    if (fresh[j].pending < 0 || fresh[j].pending >= vocab_size()) {
      // Never answer OK with a token the router cannot use; drop this item's KV.
      result.status = absl::InternalError(absl::StrCat("request ", result.id, ": sampling produced no valid token"));
      unusable.push_back(result.id);
      continue;
    }
    result.next_token = fresh[j].pending;
    sessions_.emplace(result.id, std::move(fresh[j]));
    leases_.Touch(result.id, now);
  }
  if (!unusable.empty()) leader_->Release(unusable).IgnoreError();
  return results;
}

absl::StatusOr<spec::DraftTree> VerifierCore::CheckVerifyItem(const spec::VerifyItem& item) const {
  const int32_t max_positions = MaxContext();
  if (!sessions_.count(item.id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown session: request ", item.id, " was never prefilled here or was released"));
  }
  absl::StatusOr<spec::DraftTree> tree = BuildTree(item.draft, vocab_size(), options_.max_draft_tokens);
  if (!tree.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", item.id, ": malformed draft tree: ", tree.status().message()));
  }
  if (kv().Length(item.id) + 1 + tree->max_depth() > max_positions) {
    return absl::OutOfRangeError(
        absl::StrCat("request ", item.id, ": the step runs past the model's context of ", max_positions, " tokens"));
  }
  return tree;
}

absl::StatusOr<spec::VerifyResponse> VerifierCore::Verify(const std::vector<spec::VerifyItem>& items) {
  const auto start = Clock::now();
  spec::VerifyResponse response;
  response.results.resize(items.size());
  // Each item is checked on its own: a bad one gets its status, the others run.
  std::vector<size_t> ready;
  std::vector<spec::DraftTree> trees;
  std::unordered_set<spec::RequestId> seen;
  for (size_t i = 0; i < items.size(); ++i) {
    spec::VerifyResult& result = response.results[i];
    result.id = items[i].id;
    if (!seen.insert(items[i].id).second) {
      result.status =
          absl::InvalidArgumentError(absl::StrCat("request ", items[i].id, " appears twice in one verify batch"));
      continue;
    }
    absl::StatusOr<spec::DraftTree> tree = CheckVerifyItem(items[i]);
    if (!tree.ok()) {
      result.status = tree.status();
      continue;
    }
    ready.push_back(i);
    trees.push_back(*std::move(tree));
  }

  if (!ready.empty()) {
    // One step per session: the pending token as node 0, then the tree; logits at every node.
    std::vector<engine::SequenceStep> steps;
    std::vector<int32_t> bases;
    std::vector<int32_t> first_row;
    steps.reserve(ready.size());
    int32_t rows = 0;
    for (size_t j = 0; j < ready.size(); ++j) {
      const spec::RequestId id = items[ready[j]].id;
      const Session& session = sessions_.at(id);
      engine::SequenceStep step;
      step.seq = id;
      step.tokens = trees[j].TokensWithRoot(session.pending);
      step.parents = trees[j].ParentsWithRoot();
      step.logit_nodes.resize(step.tokens.size());
      for (size_t n = 0; n < step.tokens.size(); ++n) step.logit_nodes[n] = static_cast<int32_t>(n);
      bases.push_back(kv().Length(id));
      first_row.push_back(rows);
      rows += static_cast<int32_t>(step.tokens.size());
      steps.push_back(std::move(step));
    }
    engine::ForwardResult forward;
    if (absl::Status s = leader_->BeginVerify(steps, &forward); !s.ok()) return s;

    // Rank 0 alone decides; the decisions reach the other ranks in one commit.
    std::vector<CommitOp> commits;
    commits.reserve(ready.size());
    for (size_t j = 0; j < ready.size(); ++j) {
      spec::VerifyResult& result = response.results[ready[j]];
      Session& session = sessions_.at(result.id);
      const spec::DraftTree& tree = trees[j];
      // Rows first_row[j] .. first_row[j] + tree.size() are this request's (1 + n_nodes, vocab)
      // block in the layout spec::Verify expects (row 0 = after the pending token).
      const size_t vocab = static_cast<size_t>(vocab_size());
      const absl::Span<const float> logits = absl::MakeConstSpan(
          forward.Row(first_row[j]), (static_cast<size_t>(tree.size()) + 1) * vocab);
      absl::StatusOr<spec::VerifyOutcome> outcome =
          spec::Verify(tree, logits, vocab_size(), session.sampling, *session.rng);
      // Inputs were checked above, so a failure here is internal: the step is undone for all.
      // So is a token outside the vocabulary: never answered OK.
      if (outcome.ok()) {
        for (int32_t token : outcome->tokens) {
          if (token < 0 || token >= vocab_size()) {
            outcome = absl::InternalError(absl::StrCat("request ", result.id, ": acceptance produced token ",
                                                       token, ", outside the vocabulary"));
            break;
          }
        }
      }
      if (!outcome.ok()) {
        if (absl::Status s = leader_->Abort(); !s.ok()) return s;
        return outcome.status();
      }
      commits.push_back(CommitOp{result.id, bases[j], outcome->AcceptedRowsWithRoot()});
      result.accept_length = outcome->accept_length();
      result.tokens = std::move(outcome->tokens);
    }
    if (absl::Status s = leader_->Commit(commits); !s.ok()) return s;
    const double now = Now();
    for (size_t i : ready) {
      const spec::VerifyResult& result = response.results[i];
      sessions_.at(result.id).pending = result.tokens.back();
      leases_.Touch(result.id, now);
    }
  }
  response.compute_seconds = SecondsSince(start);
  response.free_blocks = kv().free_blocks();
  response.total_blocks = kv().total_blocks();
  return response;
}

int32_t VerifierCore::Release(const std::vector<spec::RequestId>& ids) {
  std::vector<engine::SeqId> known;
  for (spec::RequestId id : ids) {
    leases_.Forget(id);
    if (sessions_.erase(id) > 0) known.push_back(id);
  }
  if (!known.empty()) {
    // Only a broken group fails here; rank 0's own KV is freed either way.
    if (absl::Status s = leader_->Release(known); !s.ok()) {
      std::fprintf(stderr, "splitspec-verifier: release not broadcast: %s\n", std::string(s.message()).c_str());
    }
  }
  return static_cast<int32_t>(known.size());
}

int32_t VerifierCore::ReclaimIdle() {
  const std::vector<spec::RequestId> expired = leases_.TakeExpired(Now());
  return expired.empty() ? 0 : Release(expired);
}

spec::WorkerInfo VerifierCore::Info() const {
  spec::WorkerInfo info;
  info.model_name = model_name_;
  info.vocab_size = vocab_size();
  info.free_blocks = kv().free_blocks();
  info.total_blocks = kv().total_blocks();
  info.block_size = kv().block_size();
  info.max_draft_tokens = options_.max_draft_tokens;
  info.live_sessions = static_cast<int32_t>(sessions_.size());
  info.max_context_tokens = MaxContext();
  return info;
}

int32_t VerifierCore::KvLength(spec::RequestId id) const {
  return sessions_.count(id) ? kv().Length(id) : -1;
}

}  // namespace splitspec::verifier
