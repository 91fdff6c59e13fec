// One rank's engine state and its step operations (see verifier_replica.h).
#include "verifier/verifier_replica.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace splitspec::verifier {
namespace {

// Every rank adds 1 when it failed; all ranks see the same total. The value travels through
// backend memory, as Communicator requires (device memory under NCCL).
absl::StatusOr<int> CountFailedRanks(engine::Backend& backend, engine::Communicator& comm,
                                     bool failed) {
  absl::StatusOr<engine::Tensor> cell = backend.Allocate(engine::DType::kF32, 1, 1);
  if (!cell.ok()) return cell.status();
  const float mine = failed ? 1.0f : 0.0f;
  backend.Upload(&mine, *cell);
  absl::Status reduced = comm.AllReduceSum(cell->f32(), 1);
  float total = 0;
  if (reduced.ok()) backend.DownloadRows(*cell, 0, 1, &total);
  backend.Free(*cell);
  if (!reduced.ok()) return reduced;
  if (absl::Status s = engine::BackendStatus(backend); !s.ok()) return s;
  return static_cast<int>(total + 0.5f);
}

}  // namespace

absl::StatusOr<std::unique_ptr<VerifierReplica>> VerifierReplica::Create(
    const ReplicaOptions& options, engine::Communicator* comm) {
  // Before binding: a missing GPU is UNAVAILABLE (UNIMPLEMENTED without CUDA), not a CUDA error.
  if (absl::Status s = engine::CheckDevice(options.device); !s.ok()) return s;
  const engine::DeviceSpec device = *engine::ParseDevice(options.device);
  if (absl::Status s = engine::BindCallingThread(device, options.n_threads); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<engine::Backend>> backend =
      engine::CreateBackendByName(options.device, {options.n_threads});
  if (!backend.ok()) return backend.status();
  return Create(options, std::move(*backend), comm);
}

absl::StatusOr<std::unique_ptr<VerifierReplica>> VerifierReplica::Create(
    const ReplicaOptions& options, std::unique_ptr<engine::Backend> backend,
    engine::Communicator* comm) {
  if (backend == nullptr) return absl::InvalidArgumentError("no backend");
  if (options.tp_size > 1 &&
      (comm == nullptr || comm->size() != options.tp_size || comm->rank() != options.tp_rank)) {
    return absl::InvalidArgumentError(
        "tensor parallelism (tp_size > 1) needs the rank's communicator of that group");
  }
  absl::StatusOr<engine::DeviceSpec> device = engine::ParseDevice(options.device);

  // Every check and the load happen before the vote (under TP), so that a rank that fails
  // anything makes the whole group fail together and no rank enters the step loop alone.
  std::unique_ptr<engine::LlamaModel> model;
  std::unique_ptr<engine::KvCache> kv;
  absl::Status loaded = [&]() -> absl::Status {
    if (!device.ok()) return device.status();
    if (absl::Status s = engine::BindCallingThread(*device, options.n_threads); !s.ok()) return s;
    if (options.kv_blocks <= 0 || options.block_size <= 0) {
      return absl::InvalidArgumentError("kv_blocks and block_size must be positive");
    }
    engine::ModelLoadOptions load_options;
    load_options.quantize = options.quantize;
    load_options.tp_rank = options.tp_rank;
    load_options.tp_size = options.tp_size;
    load_options.comm = options.tp_size > 1 ? comm : nullptr;
    absl::StatusOr<std::unique_ptr<engine::LlamaModel>> m =
        engine::LlamaModel::Load(options.model_dir, *backend, load_options);
    if (!m.ok()) return m.status();
    model = std::move(*m);
    absl::StatusOr<std::unique_ptr<engine::KvCache>> k =
        model->CreateKvCache(options.kv_blocks, options.block_size, options.kv_dtype);
    if (!k.ok()) return k.status();
    kv = std::move(*k);
    return engine::BackendStatus(*backend);
  }();
  if (comm != nullptr && comm->size() > 1) {
    absl::StatusOr<int> failed = CountFailedRanks(*backend, *comm, !loaded.ok());
    if (!failed.ok()) {
      loaded = failed.status();
    } else if (*failed > 0 && loaded.ok()) {
      loaded = absl::AbortedError(
          absl::StrCat(*failed,
                       " other rank(s) of the tensor-parallel group failed to load "
                       "(their own errors say why)"));
    }
  }
  if (!loaded.ok()) {
    // Backend memory goes back before the backend.
    kv.reset();
    model.reset();
    return loaded;
  }
  return std::unique_ptr<VerifierReplica>(
      new VerifierReplica(options, *device, std::move(backend), std::move(model), std::move(kv)));
}

VerifierReplica::VerifierReplica(const ReplicaOptions& options, engine::DeviceSpec device,
                                 std::unique_ptr<engine::Backend> backend,
                                 std::unique_ptr<engine::LlamaModel> model,
                                 std::unique_ptr<engine::KvCache> kv)
    : options_(options),
      device_(device),
      backend_(std::move(backend)),
      model_(std::move(model)),
      kv_(std::move(kv)) {}

VerifierReplica::~VerifierReplica() {
  // The KV cache and model hold backend memory: free them before the backend.
  kv_.reset();
  model_.reset();
}

absl::Status VerifierReplica::BindCallingThread() const {
  return engine::BindCallingThread(device_, options_.n_threads);
}

absl::Status VerifierReplica::Forward(const std::vector<engine::SequenceStep>& steps,
                                      engine::ForwardResult* result) {
  if (absl::Status s = BindCallingThread(); !s.ok()) return s;
  if (absl::Status s = model_->Forward(steps, *kv_, result); !s.ok()) return s;
  return engine::BackendStatus(*backend_);
}

absl::Status VerifierReplica::BeginPrefill(const std::vector<engine::SequenceStep>& steps,
                                           engine::ForwardResult* result) {
  if (step_.open) return absl::FailedPreconditionError("a step is already open");
  OpenStep step;
  step.prefill = true;
  for (const engine::SequenceStep& s : steps) {
    if (!step.bases.emplace(s.seq, 0).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", s.seq, " appears twice in one prefill"));
    }
    if (kv_->HasSequence(s.seq))
      return absl::AlreadyExistsError(absl::StrCat("sequence ", s.seq, " exists"));
  }
  for (const engine::SequenceStep& s : steps) {
    absl::Status added = kv_->AddSequence(s.seq);  // cannot fail after the checks above
    if (!added.ok()) return added;
    sequences_.insert(s.seq);
  }
  step.open = true;
  step_ = std::move(step);
  if (absl::Status s = Forward(steps, result); !s.ok()) {
    Abort();
    return s;
  }
  return absl::OkStatus();
}

absl::Status VerifierReplica::BeginVerify(const std::vector<engine::SequenceStep>& steps,
                                          engine::ForwardResult* result) {
  if (step_.open) return absl::FailedPreconditionError("a step is already open");
  OpenStep step;
  for (const engine::SequenceStep& s : steps) {
    if (!kv_->HasSequence(s.seq))
      return absl::InvalidArgumentError(absl::StrCat("unknown sequence ", s.seq));
    if (!step.bases.emplace(s.seq, kv_->Length(s.seq)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", s.seq, " appears twice in one verify step"));
    }
  }
  // Forward validates everything before it appends, so a failed forward changed nothing.
  if (absl::Status s = Forward(steps, result); !s.ok()) return s;
  step.open = true;
  step_ = std::move(step);
  return absl::OkStatus();
}

absl::Status VerifierReplica::CheckCommit(const std::vector<CommitOp>& ops) const {
  if (!step_.open) return absl::FailedPreconditionError("commit without an open step");
  // A verify step commits every sequence it fed exactly once; a prefill commits nothing.
  const size_t expected = step_.prefill ? 0 : step_.bases.size();
  std::set<engine::SeqId> seen;
  for (const CommitOp& op : ops) {
    auto it = step_.bases.find(op.seq);
    if (it == step_.bases.end() || step_.prefill || it->second != op.base ||
        !seen.insert(op.seq).second) {
      return absl::FailedPreconditionError(absl::StrCat("commit for sequence ", op.seq, " at ",
                                                        op.base, " does not match the open step"));
    }
  }
  if (ops.size() != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat("commit of ", ops.size(), " sequences for a step that fed ", expected));
  }
  return absl::OkStatus();
}

absl::Status VerifierReplica::Commit(const std::vector<CommitOp>& ops) {
  if (absl::Status s = CheckCommit(ops); !s.ok()) return s;
  step_ = OpenStep{};
  for (const CommitOp& op : ops) {
    if (absl::Status s = kv_->CommitPath(op.seq, op.base, op.nodes); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void VerifierReplica::Abort() {
  if (!step_.open) return;
  for (const auto& [seq, base] : step_.bases) {
    if (step_.prefill) {
      kv_->Release(seq);
      sequences_.erase(seq);
    } else if (kv_->Length(seq) > base) {
      kv_->Truncate(seq, base).IgnoreError();  // shrinking to an earlier length cannot fail
    }
  }
  step_ = OpenStep{};
}

void VerifierReplica::Release(const std::vector<engine::SeqId>& ids) {
  for (engine::SeqId id : ids) {
    kv_->Release(id);
    sequences_.erase(id);
  }
}

KvSnapshot VerifierReplica::Snapshot() const {
  KvSnapshot snapshot;
  snapshot.free_blocks = kv_->free_blocks();
  for (engine::SeqId seq : sequences_) {
    snapshot.lengths[seq] = kv_->Length(seq);
    snapshot.block_tables[seq] = kv_->BlockTable(seq);
  }
  return snapshot;
}

}  // namespace splitspec::verifier
