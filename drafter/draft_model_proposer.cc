// Draft-model proposer (see draft_model_proposer.h).
#include "drafter/draft_model_proposer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/engine/sampling/sampler.h"
#include "common/engine/sampling/splitmix.h"
#include "drafter/tree_growth.h"

namespace splitspec::drafter {
namespace {

// Mixed into the request's seed so the drafter's draws are a different stream from the
// verifier's (which uses the seed itself): correlated draft and acceptance draws would bias
// rejection sampling.
constexpr uint64_t kDraftStreamSalt = 0x9d2c5680a5c3f1b7ULL;

// The draw for a chain token at `position` of the request's sequence, keyed by the position
// rather than taken from a stream: the same context gives the same draft token whichever call
// drafts it (a chain with the pipeline's guess, a draft made ahead and then dropped, the
// Propose after either), so a seeded request's output does not depend on which of those the
// router chose, a choice that follows measured timings. A position's draw only ever reaches
// the verifier once: a draft token at or past a rejection is discarded, and the next draft
// starts after the token the verifier emitted there.
engine::Rng ChainDrawRng(uint64_t seed, size_t position) {
  return engine::Rng(engine::Mix64((seed ^ kDraftStreamSalt) ^ engine::Mix64(static_cast<uint64_t>(position) + 0x632be59bd9b4e019ULL)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DraftModelProposer>> DraftModelProposer::Create(const DraftModelOptions& options) {
  if (options.kv_blocks <= 0 || options.block_size <= 0) {
    return absl::InvalidArgumentError("kv_blocks and block_size must be positive");
  }
  // Before binding: a missing GPU is UNAVAILABLE (UNIMPLEMENTED without CUDA), not a CUDA error.
  if (absl::Status s = engine::CheckDevice(options.device); !s.ok()) return s;
  absl::StatusOr<engine::DeviceSpec> device = engine::ParseDevice(options.device);
  if (!device.ok()) return device.status();
  if (absl::Status s = engine::BindCallingThread(*device, options.n_threads); !s.ok()) return s;
  engine::CpuBackendOptions backend_options;
  backend_options.n_threads = options.n_threads;
  absl::StatusOr<std::unique_ptr<engine::Backend>> backend = engine::CreateBackendByName(options.device, backend_options);
  if (!backend.ok()) return backend.status();
  engine::ModelLoadOptions load_options;
  load_options.quantize = options.quantize;
  absl::StatusOr<std::unique_ptr<engine::LlamaModel>> model =
      engine::LlamaModel::Load(options.model_dir, **backend, load_options);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<engine::KvCache>> kv = (*model)->CreateKvCache(options.kv_blocks, options.block_size, options.kv_dtype);
  if (!kv.ok()) return kv.status();
  if (absl::Status s = engine::BackendStatus(**backend); !s.ok()) return s;
  return std::unique_ptr<DraftModelProposer>(
      new DraftModelProposer(options, *device, std::move(*backend), std::move(*model), std::move(*kv)));
}

DraftModelProposer::DraftModelProposer(const DraftModelOptions& options, engine::DeviceSpec device,
                                       std::unique_ptr<engine::Backend> backend,
                                       std::unique_ptr<engine::LlamaModel> model,
                                       std::unique_ptr<engine::KvCache> kv)
    : options_(options),
      device_(device),
      backend_(std::move(backend)),
      model_(std::move(model)),
      kv_(std::move(kv)) {}

absl::Status DraftModelProposer::Forward(const std::vector<engine::SequenceStep>& steps,
                                         engine::ForwardResult* result) {
  if (absl::Status s = model_->Forward(steps, *kv_, result); !s.ok()) return s;
  return engine::BackendStatus(*backend_);
}

DraftModelProposer::~DraftModelProposer() {
  // Backend memory goes back before the backend itself.
  kv_.reset();
  model_.reset();
}

namespace {

bool WantsTree(const ProposeTask& task) { return task.shape.branching > 1; }

// A chain drafted after a hypothesis and, beside it, after other outcomes of the same verify
// step (DraftAfterOutcomes).
bool WantsAlternatives(const ProposeTask& task) {
  return task.assumed > 0 && task.alternatives > 0 && task.alternatives_out != nullptr && !WantsTree(task);
}

// The best token of `logits` other than `excluded` (the lowest id among equals).
int32_t BestOtherThan(absl::Span<const float> logits, int32_t excluded) {
  int32_t best = -1;
  for (int32_t v = 0; v < static_cast<int32_t>(logits.size()); ++v) {
    if (v != excluded && (best < 0 || logits[v] > logits[best])) best = v;
  }
  return best;
}

// log of softmax's denominator at temperature 1: log softmax(logits)[t] = logits[t] - this.
double LogNormalizer(absl::Span<const float> logits) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  return max + std::log(sum);
}

// One request's tree being grown this step, and where its fed nodes sit in the draft KV.
struct GrowingTree {
  size_t task = 0;
  TreeGrowth growth;
  std::vector<int32_t> column_of_node;  // KV tree column of each fed node, -1 if not fed
};

TreeGrowthOptions GrowthOptions(const ProposeTask& task, int32_t depth) {
  TreeGrowthOptions options;
  options.depth = depth;
  options.branching = task.shape.branching;
  options.budget = task.shape.max_nodes > 0 ? task.shape.max_nodes : depth * task.shape.branching;
  options.sampled = !task.sampling.greedy();
  return options;
}

// The distribution a tree ranks (greedy: the softmax at temperature 1) or draws from.
std::vector<float> TreeRow(const ProposeTask& task, absl::Span<const float> logits) {
  if (!task.sampling.greedy()) return engine::ComputeProbabilities(logits, task.sampling);
  engine::SamplingParams ranking;
  ranking.temperature = 1.0f;
  return engine::ComputeProbabilities(logits, ranking);
}

}  // namespace

absl::Status DraftModelProposer::CommitTreePath(spec::RequestId id, absl::Span<const int32_t> history,
                                                RequestState& state) {
  if (state.tree_tokens.empty()) return absl::OkStatus();
  const size_t base = state.kv_tokens.size();
  std::vector<int32_t> path;
  if (base <= history.size() && std::equal(state.kv_tokens.begin(), state.kv_tokens.end(), history.begin())) {
    int32_t at = -1;
    for (size_t pos = base; pos < history.size(); ++pos) {
      int32_t next = -1;
      for (int32_t c = 0; c < static_cast<int32_t>(state.tree_tokens.size()) && next < 0; ++c) {
        if (state.tree_parents[c] == at && state.tree_tokens[c] == history[pos]) next = c;
      }
      if (next < 0) break;
      path.push_back(next);
      at = next;
    }
  }
  for (int32_t c : path) state.kv_tokens.push_back(state.tree_tokens[c]);
  state.tree_tokens.clear();
  state.tree_parents.clear();
  return kv_->CommitPath(id, static_cast<int32_t>(base), path);
}

absl::StatusOr<size_t> DraftModelProposer::KeepCommittedPrefix(spec::RequestId id, absl::Span<const int32_t> history,
                                                                RequestState& state) {
  if (!kv_->HasSequence(id)) {
    if (absl::Status s = kv_->AddSequence(id); !s.ok()) return s;
    state.kv_tokens.clear();
    state.tree_tokens.clear();
    state.tree_parents.clear();
  }
  if (absl::Status s = CommitTreePath(id, history, state); !s.ok()) return s;
  // The pending token (history.back()) is never kept: it is fed again so its logits exist.
  std::vector<int32_t>& held = state.kv_tokens;
  const size_t limit = std::min(held.size(), history.size() - 1);
  size_t common = 0;
  while (common < limit && held[common] == history[common]) ++common;
  if (absl::Status s = kv_->Truncate(id, static_cast<int32_t>(common)); !s.ok()) return s;
  held.resize(common);
  return common;
}

engine::Rng& DraftModelProposer::RngFor(const ProposeTask& task, RequestState& state) const {
  if (state.rng == nullptr) state.rng = std::make_unique<engine::Rng>(task.sampling.seed ^ kDraftStreamSalt);
  return *state.rng;
}

absl::StatusOr<std::vector<spec::DraftProposal>> DraftModelProposer::Propose(absl::Span<const ProposeTask> tasks) {
  std::vector<spec::DraftProposal> proposals(tasks.size());
  const int32_t max_positions = model_->config().max_position_embeddings;

  // Depth each task will actually get: its history fills positions [0, L) and drafts d1..d_{k-1}
  // are fed at L.., so k - 1 more positions must fit in the context.
  std::vector<int32_t> depth(tasks.size(), 0);
  std::vector<size_t> active, with_alternatives;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const ProposeTask& task = tasks[i];
    const int32_t length = static_cast<int32_t>(task.history->size());
    depth[i] = std::max(0, std::min(task.shape.depth, max_positions - length));
    if (depth[i] <= 0) continue;
    (WantsAlternatives(task) ? with_alternatives : active).push_back(i);
  }
  if (active.empty() && with_alternatives.empty()) return proposals;
  // gRPC runs each call on a thread of its own: make it this backend's (CUDA device, threads).
  if (absl::Status s = engine::BindCallingThread(device_, options_.n_threads); !s.ok()) return s;
  if (!with_alternatives.empty()) {
    if (absl::Status s = DraftAfterOutcomes(tasks, with_alternatives, depth, proposals); !s.ok()) return s;
  }
  if (active.empty()) return proposals;

  // First forward: roll each sequence back to the longest prefix that still agrees with the
  // committed history (dropping the rejected speculation; a tree keeps its accepted path),
  // then feed the rest of the history (always at least the pending token) and read the logits
  // after its last token.
  std::vector<engine::SequenceStep> steps;
  steps.reserve(active.size());
  for (size_t i : active) {
    const ProposeTask& task = tasks[i];
    const std::vector<int32_t>& history = *task.history;
    RequestState& state = states_[task.id];
    absl::StatusOr<size_t> kept = KeepCommittedPrefix(task.id, history, state);
    if (!kept.ok()) return kept.status();
    const size_t common = *kept;
    engine::SequenceStep step;
    step.seq = task.id;
    step.tokens.assign(history.begin() + static_cast<std::ptrdiff_t>(common), history.end());
    step.logit_nodes = {static_cast<int32_t>(step.tokens.size()) - 1};
    steps.push_back(std::move(step));
  }
  engine::ForwardResult forward;
  absl::Status status = Forward(steps, &forward);
  if (absl::IsResourceExhausted(status)) return proposals;  // no room: propose nothing this step
  if (!status.ok()) return status;
  std::vector<GrowingTree> trees;
  std::vector<size_t> chains;
  for (size_t a = 0; a < active.size(); ++a) {
    const size_t i = active[a];
    const ProposeTask& task = tasks[i];
    RequestState& state = states_[task.id];
    state.kv_tokens.insert(state.kv_tokens.end(), steps[a].tokens.begin(), steps[a].tokens.end());
    const absl::Span<const float> logits(forward.Row(static_cast<int64_t>(a)), model_->config().vocab_size);
    if (!WantsTree(task)) {
      chains.push_back(i);
      AppendDraftToken(task, state.kv_tokens.size(), logits.data(), &proposals[i]);
      continue;
    }
    GrowingTree tree{i, TreeGrowth(GrowthOptions(task, depth[i])), {}};
    const std::vector<float> root_row[] = {TreeRow(task, logits)};
    tree.growth.AddChildren(root_row, task.sampling.greedy() ? nullptr : &RngFor(task, state));
    trees.push_back(std::move(tree));
  }

  // Deeper levels, one forward each: a chain feeds its last token, a tree the nodes it
  // expands next (with its nodes already in the KV as masked context).
  for (int32_t level = 1;; ++level) {
    std::vector<size_t> growing_chains;
    std::vector<GrowingTree*> growing_trees;
    steps.clear();
    for (size_t i : chains) {
      if (depth[i] <= level) continue;
      growing_chains.push_back(i);
      engine::SequenceStep step;
      step.seq = tasks[i].id;
      step.tokens = {proposals[i].tokens.back()};
      step.logit_nodes = {0};
      steps.push_back(std::move(step));
    }
    for (GrowingTree& tree : trees) {
      const std::vector<int32_t>& expanding = tree.growth.Expanding();
      if (expanding.empty()) continue;
      growing_trees.push_back(&tree);
      const RequestState& state = states_[tasks[tree.task].id];
      tree.column_of_node.resize(static_cast<size_t>(tree.growth.size()), -1);
      engine::SequenceStep step;
      step.seq = tasks[tree.task].id;
      step.tree_context = state.tree_parents;
      for (int32_t node : expanding) {
        const int32_t parent = tree.growth.parent(node);
        step.tokens.push_back(tree.growth.token(node));
        step.parents.push_back(parent < 0 ? -1 : tree.column_of_node[parent]);
        step.logit_nodes.push_back(static_cast<int32_t>(step.logit_nodes.size()));
      }
      steps.push_back(std::move(step));
    }
    if (steps.empty()) break;
    status = Forward(steps, &forward);
    if (absl::IsResourceExhausted(status)) break;  // keep the shorter proposals
    if (!status.ok()) return status;
    int64_t row = 0;
    for (size_t i : growing_chains) {
      RequestState& state = states_[tasks[i].id];
      state.kv_tokens.push_back(proposals[i].tokens.back());
      AppendDraftToken(tasks[i], state.kv_tokens.size(), forward.Row(row++), &proposals[i]);
    }
    for (GrowingTree* tree : growing_trees) {
      const ProposeTask& task = tasks[tree->task];
      RequestState& state = states_[task.id];
      std::vector<std::vector<float>> rows;
      for (int32_t node : tree->growth.Expanding()) {
        const int32_t parent = tree->growth.parent(node);
        tree->column_of_node[node] = static_cast<int32_t>(state.tree_tokens.size());
        state.tree_tokens.push_back(tree->growth.token(node));
        state.tree_parents.push_back(parent < 0 ? -1 : tree->column_of_node[parent]);
        rows.push_back(TreeRow(task, absl::MakeConstSpan(forward.Row(row++), model_->config().vocab_size)));
      }
      tree->growth.AddChildren(rows, task.sampling.greedy() ? nullptr : &RngFor(task, state));
    }
  }
  for (GrowingTree& tree : trees) proposals[tree.task] = tree.growth.Proposal();
  return proposals;
}

namespace {

// One chain being drafted after an outcome of the verify step a draft-ahead assumes.
struct OutcomeBranch {
  size_t task = 0;
  int32_t alternative = -1;      // its index among the task's alternatives; -1 for the hypothesis
  std::vector<int32_t> assumed;  // an alternative's tokens in place of the hypothesis
  int32_t next_token = 0;        // the token to feed next
  int32_t parent_column = 0;     // the KV tree column it hangs from
  size_t next_position = 0;      // the request's sequence position of the token drafted next
  spec::DraftProposal drafted;   // a chain; a sampled request's q rows with it
};

// The row outcomes are ranked by at one position of a hypothesis (see RankOutcomes): a greedy
// request's logits themselves, whose softmax at temperature 1 ranks its draft's choices; a
// sampled request's log q, the distribution its draft tokens are drawn from (-inf outside its
// top-k or top-p), which the verifier's draw at a rejection follows where the two models agree,
// written to *log_q.
absl::Span<const float> RankingRow(const ProposeTask& task, absl::Span<const float> logits,
                                   std::vector<float>* log_q) {
  if (task.sampling.greedy()) return logits;
  *log_q = engine::ComputeProbabilities(logits, task.sampling);
  for (float& p : *log_q) p = p > 0 ? std::log(p) : -std::numeric_limits<float>::infinity();
  return *log_q;
}

// Where a task's alternatives branch off its hypothesis H (n tokens): at position j, H's first j
// tokens and then the best other token than H[j]. `rows[j]` ranks the draft's choices for
// position j (RankingRow; row 0 after the pending token, row j after H[j - 1]). Ranked by the
// draft's own chance of that outcome: its probabilities of H[0..j) times that of the other
// token; the first `wanted` (ties to the shorter prefix), none the draft gives no chance.
std::vector<std::pair<int32_t, int32_t>> RankOutcomes(const std::vector<absl::Span<const float>>& rows,
                                                      absl::Span<const int32_t> hypothesis, int32_t wanted) {
  std::vector<std::pair<double, std::pair<int32_t, int32_t>>> ranked;  // (-log chance, (j, token))
  double prefix = 0;  // log chance of H[0..j)
  for (int32_t j = 0; j < static_cast<int32_t>(hypothesis.size()); ++j) {
    const double normalizer = LogNormalizer(rows[j]);  // once a row: a pass of exps over the vocabulary
    if (!std::isfinite(normalizer)) break;             // a row without mass: no outcome from here on
    const int32_t other = BestOtherThan(rows[j], hypothesis[j]);
    if (other >= 0 && std::isfinite(rows[j][other])) {
      ranked.push_back({-(prefix + rows[j][other] - normalizer), {j, other}});
    }
    prefix += rows[j][hypothesis[j]] - normalizer;
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<int32_t, int32_t>> chosen;
  for (size_t r = 0; r < ranked.size() && static_cast<int32_t>(chosen.size()) < wanted; ++r) {
    chosen.push_back(ranked[r].second);
  }
  return chosen;
}

}  // namespace

absl::Status DraftModelProposer::DraftAfterOutcomes(absl::Span<const ProposeTask> tasks,
                                                    const std::vector<size_t>& which,
                                                    const std::vector<int32_t>& depth,
                                                    std::vector<spec::DraftProposal>& proposals) {
  const int32_t vocab = model_->config().vocab_size;
  // First forward: each sequence rolled back to the committed tokens it still agrees with; then
  // the committed tokens it lacks (at least the pending one) and the hypothesis, as one chain
  // of tree nodes, with logits after the pending token and after each hypothesis token.
  std::vector<engine::SequenceStep> steps;
  std::vector<int32_t> catch_up(which.size());
  for (size_t a = 0; a < which.size(); ++a) {
    const ProposeTask& task = tasks[which[a]];
    const std::vector<int32_t>& history = *task.history;
    const size_t committed = history.size() - static_cast<size_t>(task.assumed);
    RequestState& state = states_[task.id];
    absl::StatusOr<size_t> kept = KeepCommittedPrefix(task.id, absl::MakeConstSpan(history.data(), committed), state);
    if (!kept.ok()) return kept.status();
    const size_t common = *kept;
    engine::SequenceStep step;
    step.seq = task.id;
    step.tokens.assign(history.begin() + static_cast<std::ptrdiff_t>(common), history.end());
    catch_up[a] = static_cast<int32_t>(committed - common);
    for (size_t n = 0; n < step.tokens.size(); ++n) step.parents.push_back(static_cast<int32_t>(n) - 1);
    for (int32_t n = catch_up[a] - 1; n < static_cast<int32_t>(step.tokens.size()); ++n) step.logit_nodes.push_back(n);
    steps.push_back(std::move(step));
  }
  engine::ForwardResult forward;
  absl::Status status = Forward(steps, &forward);
  if (absl::IsResourceExhausted(status)) return absl::OkStatus();  // no room: propose nothing
  if (!status.ok()) return status;

  // The branches: the hypothesis continues after its last token; each alternative feeds its
  // other token first, as a child of the hypothesis token before it (or of the pending token).
  // A branch's draft tokens sit at the positions a Propose after that outcome would draft them
  // at, so a sampled request draws the same tokens either way (ChainDrawRng).
  std::vector<OutcomeBranch> branches;
  int64_t row = 0;
  for (size_t a = 0; a < which.size(); ++a) {
    const ProposeTask& task = tasks[which[a]];
    RequestState& state = states_[task.id];
    state.tree_tokens = steps[a].tokens;
    state.tree_parents = steps[a].parents;
    const size_t committed = task.history->size() - static_cast<size_t>(task.assumed);
    const absl::Span<const int32_t> hypothesis(task.history->data() + committed, static_cast<size_t>(task.assumed));
    std::vector<std::vector<float>> log_q(task.sampling.greedy() ? 0 : static_cast<size_t>(task.assumed) + 1);
    std::vector<absl::Span<const float>> rows;
    for (int32_t j = 0; j <= task.assumed; ++j) {
      rows.push_back(RankingRow(task, absl::MakeConstSpan(forward.Row(row + j), vocab),
                                log_q.empty() ? nullptr : &log_q[static_cast<size_t>(j)]));
    }
    const float* last_logits = forward.Row(row + task.assumed);
    row += task.assumed + 1;
    const int32_t last_column = static_cast<int32_t>(state.tree_tokens.size()) - 1;
    OutcomeBranch main{which[a], -1, {}, 0, last_column, task.history->size(), {}};
    AppendDraftToken(task, main.next_position++, last_logits, &main.drafted);
    main.next_token = main.drafted.tokens.back();
    branches.push_back(std::move(main));
    const std::vector<std::pair<int32_t, int32_t>> outcomes = RankOutcomes(rows, hypothesis, task.alternatives);
    for (size_t o = 0; o < outcomes.size(); ++o) {
      const auto [j, other] = outcomes[o];
      OutcomeBranch alternative{which[a], static_cast<int32_t>(o), {}, other, catch_up[a] - 1 + j,
                                committed + static_cast<size_t>(j) + 1, {}};
      alternative.assumed.assign(hypothesis.begin(), hypothesis.begin() + j);
      alternative.assumed.push_back(other);
      branches.push_back(std::move(alternative));
    }
  }

  // Deeper levels, one forward each: every branch still short of its depth feeds its next token.
  for (;;) {
    std::map<size_t, std::vector<OutcomeBranch*>> feeding;  // by task, in task order
    for (OutcomeBranch& branch : branches) {
      if (static_cast<int32_t>(branch.drafted.tokens.size()) < depth[branch.task]) {
        feeding[branch.task].push_back(&branch);
      }
    }
    if (feeding.empty()) break;
    steps.clear();
    for (const auto& [task, fed] : feeding) {
      engine::SequenceStep step;
      step.seq = tasks[task].id;
      step.tree_context = states_[tasks[task].id].tree_parents;
      for (const OutcomeBranch* branch : fed) {
        step.tokens.push_back(branch->next_token);
        step.parents.push_back(branch->parent_column);
        step.logit_nodes.push_back(static_cast<int32_t>(step.logit_nodes.size()));
      }
      steps.push_back(std::move(step));
    }
    status = Forward(steps, &forward);
    if (absl::IsResourceExhausted(status)) break;  // keep the shorter drafts
    if (!status.ok()) return status;
    row = 0;
    for (const auto& [task, fed] : feeding) {
      RequestState& state = states_[tasks[task].id];
      for (OutcomeBranch* branch : fed) {
        const int32_t column = static_cast<int32_t>(state.tree_tokens.size());
        state.tree_tokens.push_back(branch->next_token);
        state.tree_parents.push_back(branch->parent_column);
        branch->parent_column = column;
        AppendDraftToken(tasks[task], branch->next_position++, forward.Row(row++), &branch->drafted);
        branch->next_token = branch->drafted.tokens.back();
      }
    }
  }
  for (OutcomeBranch& branch : branches) {
    const ProposeTask& task = tasks[branch.task];
    if (branch.alternative < 0) {
      proposals[branch.task] = std::move(branch.drafted);
    } else if (!branch.drafted.tokens.empty()) {
      task.alternatives_out->push_back({std::move(branch.assumed), std::move(branch.drafted)});
    }
  }
  return absl::OkStatus();
}

void DraftModelProposer::AppendDraftToken(const ProposeTask& task, size_t position, const float* logits,
                                          spec::DraftProposal* proposal) const {
  const int32_t vocab = model_->config().vocab_size;
  const absl::Span<const float> row = absl::MakeConstSpan(logits, vocab);
  int32_t token;
  if (task.sampling.greedy()) {
    token = engine::Argmax(row);
  } else {
    std::vector<float> q = engine::ComputeProbabilities(row, task.sampling);
    engine::Rng rng = ChainDrawRng(task.sampling.seed, position);
    token = engine::SampleFromProbabilities(q, rng);
    if (token < 0) {
      // Only a row without finite logits has no mass: fall back to a one-hot q at the argmax
      // so the proposal stays well-formed (q(token) > 0).
      token = std::max(0, engine::Argmax(row));
      q.assign(static_cast<size_t>(vocab), 0.0f);
      q[static_cast<size_t>(token)] = 1.0f;
    }
    proposal->probs.insert(proposal->probs.end(), q.begin(), q.end());
  }
  proposal->parents.push_back(static_cast<int32_t>(proposal->tokens.size()) - 1);
  proposal->tokens.push_back(token);
}

void DraftModelProposer::Release(spec::RequestId id) {
  states_.erase(id);
  kv_->Release(id);
}

ProposerInfo DraftModelProposer::Info() const {
  ProposerInfo info;
  std::string name = options_.model_dir;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  const size_t slash = name.rfind('/');
  info.name = slash == std::string::npos ? name : name.substr(slash + 1);
  info.vocab_size = model_->config().vocab_size;
  info.free_blocks = kv_->free_blocks();
  info.total_blocks = kv_->total_blocks();
  info.block_size = kv_->block_size();
  return info;
}

const std::vector<int32_t>* DraftModelProposer::KvTokens(spec::RequestId id) const {
  auto it = states_.find(id);
  return it == states_.end() ? nullptr : &it->second.kv_tokens;
}

int32_t DraftModelProposer::KvLength(spec::RequestId id) const {
  return kv_->HasSequence(id) ? kv_->Length(id) : -1;
}

}  // namespace splitspec::drafter
