// Verifier core (see verifier_core.h).
#include "verifier/verifier_core.h"

#include <algorithm>
#include <chrono>
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
  if (options.max_draft_tokens < 0) return absl::InvalidArgumentError("max_draft_tokens must be >= 0");
  if (options.tp_size < 1) return absl::InvalidArgumentError(absl::StrCat("tp_size must be >= 1, got ", options.tp_size));
  return absl::OkStatus();
}

ReplicaOptions ToReplicaOptions(const VerifierOptions& options) {
  ReplicaOptions replica;
  replica.model_dir = options.model_dir;
  replica.device = options.device;
  replica.n_threads = options.n_threads;
  if (options.tp_size > 1 && replica.n_threads == 0) {
    // Ranks as threads share the cores: split them rather than oversubscribe.
    replica.n_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / options.tp_size);
  }
  replica.kv_blocks = options.kv_blocks;
  replica.block_size = options.block_size;
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
    : options_(options), model_name_(BaseName(options.model_dir)) {}

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

absl::StatusOr<std::vector<spec::PrefillResult>> VerifierCore::Prefill(const std::vector<spec::PrefillItem>& items) {
  const int32_t max_positions = config().max_position_embeddings;
  std::unordered_set<spec::RequestId> seen;
  for (const spec::PrefillItem& item : items) {
    if (!seen.insert(item.id).second) {
      return absl::InvalidArgumentError(absl::StrCat("request ", item.id, " appears twice in one prefill"));
    }
    if (sessions_.count(item.id)) {
      return absl::AlreadyExistsError(absl::StrCat("request ", item.id, " already has a session"));
    }
    if (item.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": empty prompt"));
    }
    if (static_cast<int64_t>(item.tokens.size()) >= max_positions) {
      return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": prompt of ", item.tokens.size(),
                                                     " tokens leaves no room in the model's context of ",
                                                     max_positions));
    }
    if (absl::Status s = CheckTokens(item.tokens, "prompt", item.id); !s.ok()) return s;
    if (absl::Status s = engine::ValidateSamplingParams(item.sampling); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": ", s.message()));
    }
  }
  if (items.empty()) return std::vector<spec::PrefillResult>();

  std::vector<engine::SequenceStep> steps;
  steps.reserve(items.size());
  for (const spec::PrefillItem& item : items) {
    engine::SequenceStep step;
    step.seq = item.id;
    step.tokens = item.tokens;
    step.logit_nodes = {static_cast<int32_t>(item.tokens.size()) - 1};
    steps.push_back(std::move(step));
  }
  engine::ForwardResult forward;
  if (absl::Status s = leader_->BeginPrefill(steps, &forward); !s.ok()) return s;
  std::vector<spec::PrefillResult> results;
  results.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    Session session;
    session.sampling = items[i].sampling;
    session.rng = std::make_unique<engine::Rng>(items[i].sampling.seed);
    session.pending = NextToken(session, forward.Row(static_cast<int64_t>(i)));
    results.push_back(spec::PrefillResult{items[i].id, session.pending});
    sessions_.emplace(items[i].id, std::move(session));
  }
  // Sessions exist on rank 0 only; the other ranks keep the prefilled KV.
  if (absl::Status s = leader_->Commit({}); !s.ok()) {
    // Only a broken group gets here, and the leader undid the step: no session either.
    for (const spec::PrefillItem& item : items) sessions_.erase(item.id);
    return s;
  }
  return results;
}

absl::StatusOr<spec::VerifyResponse> VerifierCore::Verify(const std::vector<spec::VerifyItem>& items) {
  const auto start = Clock::now();
  const int32_t max_positions = config().max_position_embeddings;
  std::vector<spec::DraftTree> trees;
  trees.reserve(items.size());
  std::unordered_set<spec::RequestId> seen;
  for (const spec::VerifyItem& item : items) {
    if (!seen.insert(item.id).second) {
      return absl::InvalidArgumentError(absl::StrCat("request ", item.id, " appears twice in one verify batch"));
    }
    auto it = sessions_.find(item.id);
    if (it == sessions_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown session: request ", item.id,
                                                     " was never prefilled here or was released"));
    }
    absl::StatusOr<spec::DraftTree> tree = BuildTree(item.draft, vocab_size(), options_.max_draft_tokens);
    if (!tree.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("request ", item.id, ": malformed draft tree: ",
                                                     tree.status().message()));
    }
    if (kv().Length(item.id) + 1 + tree->max_depth() > max_positions) {
      return absl::OutOfRangeError(absl::StrCat("request ", item.id, ": the draft runs past the model's context of ",
                                                max_positions, " tokens"));
    }
    trees.push_back(*std::move(tree));
  }

  spec::VerifyResponse response;
  if (!items.empty()) {
    // One step per session: the pending token as node 0, then the tree; logits at every node.
    std::vector<engine::SequenceStep> steps;
    std::vector<int32_t> bases;
    std::vector<int32_t> first_row;
    steps.reserve(items.size());
    int32_t rows = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      const Session& session = sessions_.at(items[i].id);
      engine::SequenceStep step;
      step.seq = items[i].id;
      step.tokens = trees[i].TokensWithRoot(session.pending);
      step.parents = trees[i].ParentsWithRoot();
      step.logit_nodes.resize(step.tokens.size());
      for (size_t n = 0; n < step.tokens.size(); ++n) step.logit_nodes[n] = static_cast<int32_t>(n);
      bases.push_back(kv().Length(items[i].id));
      first_row.push_back(rows);
      rows += static_cast<int32_t>(step.tokens.size());
      steps.push_back(std::move(step));
    }
    engine::ForwardResult forward;
    if (absl::Status s = leader_->BeginVerify(steps, &forward); !s.ok()) return s;

    // Rank 0 alone decides; the decisions reach the other ranks in one commit.
    std::vector<CommitOp> commits;
    commits.reserve(items.size());
    response.results.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      Session& session = sessions_.at(items[i].id);
      const spec::DraftTree& tree = trees[i];
      // Rows first_row[i] .. first_row[i] + tree.size() are this request's (1 + n_nodes, vocab)
      // block in the layout spec::Verify expects (row 0 = after the pending token).
      const size_t vocab = static_cast<size_t>(vocab_size());
      const absl::Span<const float> logits = absl::MakeConstSpan(
          forward.Row(first_row[i]), (static_cast<size_t>(tree.size()) + 1) * vocab);
      absl::StatusOr<spec::VerifyOutcome> outcome =
          spec::Verify(tree, logits, vocab_size(), session.sampling, *session.rng);
      if (!outcome.ok()) {
        if (absl::Status s = leader_->Abort(); !s.ok()) return s;
        return outcome.status();
      }
      commits.push_back(CommitOp{items[i].id, bases[i], outcome->AcceptedRowsWithRoot()});
      spec::VerifyResult result;
      result.id = items[i].id;
      result.accept_length = outcome->accept_length();
      result.tokens = std::move(outcome->tokens);
      response.results.push_back(std::move(result));
    }
    if (absl::Status s = leader_->Commit(commits); !s.ok()) return s;
    for (const spec::VerifyResult& result : response.results) sessions_.at(result.id).pending = result.tokens.back();
  }
  response.compute_seconds = SecondsSince(start);
  response.free_blocks = kv().free_blocks();
  response.total_blocks = kv().total_blocks();
  return response;
}

int32_t VerifierCore::Release(const std::vector<spec::RequestId>& ids) {
  std::vector<engine::SeqId> known;
  for (spec::RequestId id : ids) {
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

spec::WorkerInfo VerifierCore::Info() const {
  spec::WorkerInfo info;
  info.model_name = model_name_;
  info.vocab_size = vocab_size();
  info.free_blocks = kv().free_blocks();
  info.total_blocks = kv().total_blocks();
  info.block_size = kv().block_size();
  info.max_draft_tokens = options_.max_draft_tokens;
  info.live_sessions = static_cast<int32_t>(sessions_.size());
  return info;
}

int32_t VerifierCore::KvLength(spec::RequestId id) const {
  return sessions_.count(id) ? kv().Length(id) : -1;
}

}  // namespace splitspec::verifier
