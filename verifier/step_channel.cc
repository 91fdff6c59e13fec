// Step messages on the wire (see step_channel.h).
#include "verifier/step_channel.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/engine/cuda/select_backend.h"

namespace splitspec::verifier {
namespace {

constexpr uint32_t kMagic = 0x50545353;  // "SSTP"
// A message's payload can hold at most this much (a batch of trees is a few KiB); anything
// larger in a header means the group is out of step.
constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 30;
// Staging rows are 1 KiB so a small message moves one row, not the whole buffer.
constexpr int64_t kStagingCols = 256;
constexpr size_t kStagingRowBytes = kStagingCols * sizeof(float);

struct WireHeader {
  uint32_t magic = kMagic;
  uint32_t kind = 0;
  uint64_t sequence = 0;
  uint64_t payload_bytes = 0;
  uint64_t reserved = 0;
};
static_assert(sizeof(WireHeader) == 32, "the header is 32 bytes on every rank");

class Writer {
 public:
  template <typename T>
  void Put(T value) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
  }
  void PutInts(const std::vector<int32_t>& values) {
    const size_t at = bytes_.size();
    bytes_.resize(at + values.size() * sizeof(int32_t));
    if (!values.empty())
      std::memcpy(bytes_.data() + at, values.data(), values.size() * sizeof(int32_t));
  }
  std::vector<uint8_t> Take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  explicit Reader(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}

  template <typename T>
  absl::Status Get(T* value) {
    if (bytes_.size() - at_ < sizeof(T)) return Truncated();
    std::memcpy(value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return absl::OkStatus();
  }
  // `n` int32 values; the count is checked against the bytes left before allocating.
  absl::Status GetInts(uint32_t n, std::vector<int32_t>* values) {
    if ((bytes_.size() - at_) / sizeof(int32_t) < n) return Truncated();
    values->resize(n);
    if (n > 0) std::memcpy(values->data(), bytes_.data() + at_, n * sizeof(int32_t));
    at_ += n * sizeof(int32_t);
    return absl::OkStatus();
  }
  // A count of items of at least `min_item_bytes` each, which must fit in the bytes left.
  absl::Status GetCount(size_t min_item_bytes, uint32_t* n) {
    if (absl::Status s = Get(n); !s.ok()) return s;
    if ((bytes_.size() - at_) / min_item_bytes < *n) return Truncated();
    return absl::OkStatus();
  }
  absl::Status Finish() const {
    if (at_ != bytes_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("step message has ", bytes_.size() - at_, " trailing bytes"));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Truncated() const {
    return absl::InvalidArgumentError(
        absl::StrCat("step message truncated at byte ", at_, " of ", bytes_.size()));
  }
  absl::Span<const uint8_t> bytes_;
  size_t at_ = 0;
};

bool KnownKind(uint32_t kind) {
  return kind >= static_cast<uint32_t>(StepKind::kPrefill) &&
         kind <= static_cast<uint32_t>(StepKind::kShutdown);
}

}  // namespace

const char* StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kPrefill:
      return "prefill";
    case StepKind::kVerify:
      return "verify";
    case StepKind::kCommit:
      return "commit";
    case StepKind::kAbort:
      return "abort";
    case StepKind::kRelease:
      return "release";
    case StepKind::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

std::vector<uint8_t> EncodePayload(const StepMessage& message) {
  Writer w;
  switch (message.kind) {
    case StepKind::kPrefill:
    case StepKind::kVerify:
      w.Put(static_cast<uint32_t>(message.steps.size()));
      for (const engine::SequenceStep& step : message.steps) {
        w.Put(static_cast<uint64_t>(step.seq));
        w.Put(static_cast<uint32_t>(step.tokens.size()));
        w.Put(static_cast<uint32_t>(step.parents.empty() ? 0 : 1));
        w.PutInts(step.tokens);
        if (!step.parents.empty()) w.PutInts(step.parents);
      }
      break;
    case StepKind::kCommit:
      w.Put(static_cast<uint32_t>(message.commits.size()));
      for (const CommitOp& op : message.commits) {
        w.Put(static_cast<uint64_t>(op.seq));
        w.Put(op.base);
        w.Put(static_cast<uint32_t>(op.nodes.size()));
        w.PutInts(op.nodes);
      }
      break;
    case StepKind::kRelease:
      w.Put(static_cast<uint32_t>(message.ids.size()));
      for (engine::SeqId id : message.ids) w.Put(static_cast<uint64_t>(id));
      break;
    case StepKind::kAbort:
    case StepKind::kShutdown:
      break;
  }
  return w.Take();
}

absl::StatusOr<StepMessage> DecodePayload(StepKind kind, absl::Span<const uint8_t> payload) {
  StepMessage message;
  message.kind = kind;
  Reader r(payload);
  uint32_t n = 0;
  switch (kind) {
    case StepKind::kPrefill:
    case StepKind::kVerify:
      if (absl::Status s = r.GetCount(16, &n); !s.ok()) return s;
      message.steps.resize(n);
      for (engine::SequenceStep& step : message.steps) {
        uint64_t seq = 0;
        uint32_t n_tokens = 0, has_parents = 0;
        for (absl::Status s : {r.Get(&seq), r.Get(&n_tokens), r.Get(&has_parents)}) {
          if (!s.ok()) return s;
        }
        if (has_parents > 1) return absl::InvalidArgumentError("step message: bad parents flag");
        step.seq = seq;
        if (absl::Status s = r.GetInts(n_tokens, &step.tokens); !s.ok()) return s;
        if (has_parents == 1) {
          if (absl::Status s = r.GetInts(n_tokens, &step.parents); !s.ok()) return s;
        }
      }
      break;
    case StepKind::kCommit:
      if (absl::Status s = r.GetCount(16, &n); !s.ok()) return s;
      message.commits.resize(n);
      for (CommitOp& op : message.commits) {
        uint64_t seq = 0;
        uint32_t n_nodes = 0;
        for (absl::Status s : {r.Get(&seq), r.Get(&op.base), r.Get(&n_nodes)}) {
          if (!s.ok()) return s;
        }
        op.seq = seq;
        if (absl::Status s = r.GetInts(n_nodes, &op.nodes); !s.ok()) return s;
      }
      break;
    case StepKind::kRelease:
      if (absl::Status s = r.GetCount(8, &n); !s.ok()) return s;
      message.ids.resize(n);
      for (engine::SeqId& id : message.ids) {
        uint64_t value = 0;
        if (absl::Status s = r.Get(&value); !s.ok()) return s;
        id = value;
      }
      break;
    case StepKind::kAbort:
    case StepKind::kShutdown:
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown step kind ", static_cast<uint32_t>(kind)));
  }
  if (absl::Status s = r.Finish(); !s.ok()) return s;
  return message;
}

StepChannel::StepChannel(engine::Backend& backend, engine::Communicator& comm)
    : backend_(backend), comm_(comm) {}

StepChannel::~StepChannel() {
  if (staging_.data != nullptr) backend_.Free(staging_);
}

absl::Status StepChannel::Broadcast(std::vector<uint8_t>* bytes) {
  const size_t n = bytes->size();
  if (n == 0) return absl::OkStatus();
  const int64_t rows = static_cast<int64_t>((n + kStagingRowBytes - 1) / kStagingRowBytes);
  if (staging_.rows < rows) {
    if (staging_.data != nullptr) backend_.Free(staging_);
    staging_ = engine::Tensor{};
    absl::StatusOr<engine::Tensor> grown =
        backend_.Allocate(engine::DType::kF32, rows, kStagingCols);
    if (!grown.ok()) return grown.status();
    staging_ = *grown;
  }
  engine::Tensor view{staging_.data, engine::DType::kF32, rows, kStagingCols};
  std::vector<float> padded(static_cast<size_t>(rows * kStagingCols), 0.0f);
  if (comm_.rank() == 0) {
    std::memcpy(padded.data(), bytes->data(), n);
    backend_.Upload(padded.data(), view);
  }
  if (absl::Status s = comm_.Broadcast(staging_.data, n, /*root=*/0); !s.ok()) return s;
  if (comm_.rank() != 0) {
    backend_.DownloadRows(view, 0, rows, padded.data());
    std::memcpy(bytes->data(), padded.data(), n);
  }
  return engine::BackendStatus(backend_);
}

absl::Status StepChannel::Send(const StepMessage& message) {
  if (comm_.rank() != 0) return absl::FailedPreconditionError("only rank 0 sends step messages");
  if (closed_) {
    if (message.kind == StepKind::kShutdown) return absl::OkStatus();
    return absl::FailedPreconditionError("the tensor-parallel group was shut down");
  }
  if (message.kind == StepKind::kShutdown)
    closed_ = true;  // even if the broadcast fails: never twice
  std::vector<uint8_t> payload = EncodePayload(message);
  WireHeader header;
  header.kind = static_cast<uint32_t>(message.kind);
  header.sequence = next_sequence_++;
  header.payload_bytes = payload.size();
  std::vector<uint8_t> header_bytes(sizeof(header));
  std::memcpy(header_bytes.data(), &header, sizeof(header));
  if (absl::Status s = Broadcast(&header_bytes); !s.ok()) return s;
  return Broadcast(&payload);
}

absl::StatusOr<StepMessage> StepChannel::Receive() {
  if (comm_.rank() == 0)
    return absl::FailedPreconditionError("rank 0 sends step messages; it does not receive them");
  std::vector<uint8_t> header_bytes(sizeof(WireHeader));
  if (absl::Status s = Broadcast(&header_bytes); !s.ok()) return s;
  WireHeader header;
  std::memcpy(&header, header_bytes.data(), sizeof(header));
  if (header.magic != kMagic || !KnownKind(header.kind) || header.sequence != next_sequence_ ||
      header.payload_bytes > kMaxPayloadBytes) {
    return absl::InternalError(
        absl::StrCat("rank ", comm_.rank(), " is out of step with rank 0: header magic ",
                     header.magic, ", kind ", header.kind, ", sequence ", header.sequence,
                     " (expected ", next_sequence_, "), payload ", header.payload_bytes, " bytes"));
  }
  ++next_sequence_;
  std::vector<uint8_t> payload(header.payload_bytes);
  if (absl::Status s = Broadcast(&payload); !s.ok()) return s;
  return DecodePayload(static_cast<StepKind>(header.kind), payload);
}

}  // namespace splitspec::verifier
