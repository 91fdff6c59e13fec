// The step socket's compact encoding of Verify and Propose (see step_codec.h).
#include "common/rpc/step_codec.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace splitspec::rpc {
namespace {

class Writer {
 public:
  template <typename T>
  void Put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  template <typename T>
  void PutArray(const std::vector<T>& values) {
    static_assert(sizeof(T) == 4);
    Put(static_cast<uint32_t>(values.size()));
    bytes_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  }
  void PutString(absl::string_view s) {
    Put(static_cast<uint32_t>(s.size()));
    bytes_.append(s.data(), s.size());
  }
  std::string Take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class Reader {
 public:
  Reader(absl::string_view bytes, const char* what) : bytes_(bytes), what_(what) {}

  template <typename T>
  absl::Status Get(T* value) {
    if (left() < sizeof(T)) return Truncated();
    std::memcpy(value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status GetArray(std::vector<T>* values) {
    static_assert(sizeof(T) == 4);
    uint32_t n = 0;
    if (absl::Status s = Get(&n); !s.ok()) return s;
    if (left() / sizeof(T) < n) return Truncated();
    values->resize(n);
    if (n > 0) std::memcpy(values->data(), bytes_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return absl::OkStatus();
  }
  absl::Status GetString(std::string* s) {
    uint32_t n = 0;
    if (absl::Status st = Get(&n); !st.ok()) return st;
    if (left() < n) return Truncated();
    s->assign(bytes_.data() + at_, n);
    at_ += n;
    return absl::OkStatus();
  }
  // A count of items of at least `min_item_bytes` each, which must fit in the bytes left.
  absl::Status GetCount(size_t min_item_bytes, uint32_t* n) {
    if (absl::Status s = Get(n); !s.ok()) return s;
    if (left() / min_item_bytes < *n) return Truncated();
    return absl::OkStatus();
  }
  absl::Status Finish() const {
    if (at_ == bytes_.size()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(what_, " has ", left(), " trailing bytes"));
  }

 private:
  size_t left() const { return bytes_.size() - at_; }
  absl::Status Truncated() const {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, " truncated at byte ", at_, " of ", bytes_.size()));
  }
  absl::string_view bytes_;
  const char* what_;
  size_t at_ = 0;
};

// The smallest encoding of each repeated part: its fixed fields and empty arrays.
constexpr size_t kArrayBytes = sizeof(uint32_t);
constexpr size_t kStatusBytes = sizeof(int32_t) + sizeof(uint32_t);
constexpr size_t kDraftBytes = 4 * kArrayBytes;
constexpr size_t kMinVerifyItemBytes = sizeof(uint64_t) + kDraftBytes;
constexpr size_t kMinVerifyResultBytes =
    sizeof(uint64_t) + sizeof(int32_t) + kStatusBytes + kArrayBytes;
constexpr size_t kMinProposeItemBytes =
    sizeof(uint64_t) + 4 * sizeof(int32_t) + kArrayBytes + 3 * 4 + sizeof(uint64_t);
constexpr size_t kMinProposeResultBytes = sizeof(uint64_t) + kStatusBytes + kDraftBytes;

void PutStatus(const absl::Status& status, Writer* w) {
  w->Put(static_cast<int32_t>(status.code()));
  w->PutString(status.message());
}

absl::Status GetStatus(Reader* r, absl::Status* status) {
  int32_t code = 0;
  std::string message;
  for (absl::Status s : {r->Get(&code), r->GetString(&message)}) {
    if (!s.ok()) return s;
  }
  if (code == 0) {
    *status = absl::OkStatus();
  } else if (code < 0 || code > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
    *status = absl::UnknownError(message);
  } else {
    *status = absl::Status(static_cast<absl::StatusCode>(code), message);
  }
  return absl::OkStatus();
}

void PutDraft(const spec::DraftProposal& draft, Writer* w) {
  w->PutArray(draft.tokens);
  w->PutArray(draft.parents);
  w->PutArray(draft.probs);
  w->PutArray(draft.scores);
}

absl::Status GetDraft(Reader* r, spec::DraftProposal* draft) {
  for (absl::Status s : {r->GetArray(&draft->tokens), r->GetArray(&draft->parents),
                         r->GetArray(&draft->probs), r->GetArray(&draft->scores)}) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

std::string EncodeVerifyItems(const std::vector<spec::VerifyItem>& items) {
  Writer w;
  w.Put(static_cast<uint32_t>(items.size()));
  for (const spec::VerifyItem& item : items) {
    w.Put(static_cast<uint64_t>(item.id));
    PutDraft(item.draft, &w);
  }
  return w.Take();
}

absl::StatusOr<std::vector<spec::VerifyItem>> DecodeVerifyItems(absl::string_view bytes) {
  Reader r(bytes, "compact verify request");
  uint32_t n = 0;
  if (absl::Status s = r.GetCount(kMinVerifyItemBytes, &n); !s.ok()) return s;
  std::vector<spec::VerifyItem> items(n);
  for (spec::VerifyItem& item : items) {
    uint64_t id = 0;
    for (absl::Status s : {r.Get(&id), GetDraft(&r, &item.draft)}) {
      if (!s.ok()) return s;
    }
    item.id = id;
  }
  if (absl::Status s = r.Finish(); !s.ok()) return s;
  return items;
}

std::string EncodeVerifyResponse(const spec::VerifyResponse& response) {
  Writer w;
  w.Put(static_cast<uint32_t>(response.results.size()));
  for (const spec::VerifyResult& result : response.results) {
    w.Put(static_cast<uint64_t>(result.id));
    w.Put(static_cast<int32_t>(result.accept_length));
    PutStatus(result.status, &w);
    w.PutArray(result.tokens);
  }
  w.Put(response.compute_seconds);
  w.Put(static_cast<int32_t>(response.free_blocks));
  w.Put(static_cast<int32_t>(response.total_blocks));
  return w.Take();
}

absl::StatusOr<spec::VerifyResponse> DecodeVerifyResponse(absl::string_view bytes) {
  Reader r(bytes, "compact verify answer");
  uint32_t n = 0;
  if (absl::Status s = r.GetCount(kMinVerifyResultBytes, &n); !s.ok()) return s;
  spec::VerifyResponse response;
  response.results.resize(n);
  for (spec::VerifyResult& result : response.results) {
    uint64_t id = 0;
    for (absl::Status s : {r.Get(&id), r.Get(&result.accept_length), GetStatus(&r, &result.status),
                           r.GetArray(&result.tokens)}) {
      if (!s.ok()) return s;
    }
    result.id = id;
  }
  for (absl::Status s : {r.Get(&response.compute_seconds), r.Get(&response.free_blocks),
                         r.Get(&response.total_blocks), r.Finish()}) {
    if (!s.ok()) return s;
  }
  return response;
}

std::string EncodeProposeItems(const std::vector<spec::ProposeItem>& items) {
  Writer w;
  w.Put(static_cast<uint32_t>(items.size()));
  for (const spec::ProposeItem& item : items) {
    w.Put(static_cast<uint64_t>(item.id));
    w.Put(static_cast<int32_t>(item.known_length));
    w.PutArray(item.new_tokens);
    w.Put(static_cast<int32_t>(item.shape.depth));
    w.Put(static_cast<int32_t>(item.shape.branching));
    w.Put(static_cast<int32_t>(item.shape.max_nodes));
    w.Put(item.sampling.temperature);
    w.Put(static_cast<int32_t>(item.sampling.top_k));
    w.Put(item.sampling.top_p);
    w.Put(static_cast<uint64_t>(item.sampling.seed));
  }
  return w.Take();
}

absl::StatusOr<std::vector<spec::ProposeItem>> DecodeProposeItems(absl::string_view bytes) {
  Reader r(bytes, "compact propose request");
  uint32_t n = 0;
  if (absl::Status s = r.GetCount(kMinProposeItemBytes, &n); !s.ok()) return s;
  std::vector<spec::ProposeItem> items(n);
  for (spec::ProposeItem& item : items) {
    uint64_t id = 0, seed = 0;
    int32_t top_k = 0;
    for (absl::Status s : {r.Get(&id), r.Get(&item.known_length), r.GetArray(&item.new_tokens),
                           r.Get(&item.shape.depth), r.Get(&item.shape.branching),
                           r.Get(&item.shape.max_nodes), r.Get(&item.sampling.temperature),
                           r.Get(&top_k), r.Get(&item.sampling.top_p), r.Get(&seed)}) {
      if (!s.ok()) return s;
    }
    item.id = id;
    item.sampling.top_k = top_k;
    item.sampling.seed = seed;
    // As the protobuf messages read them (common/rpc/convert.cc).
    if (item.shape.branching == 0) item.shape.branching = 1;
    if (item.sampling.top_p == 0.0f) item.sampling.top_p = 1.0f;
  }
  if (absl::Status s = r.Finish(); !s.ok()) return s;
  return items;
}

std::string EncodeProposeResponse(const spec::ProposeResponse& response) {
  Writer w;
  w.Put(static_cast<uint32_t>(response.results.size()));
  for (const spec::ProposeResult& result : response.results) {
    w.Put(static_cast<uint64_t>(result.id));
    PutStatus(result.status, &w);
    PutDraft(result.draft, &w);
  }
  w.Put(response.compute_seconds);
  return w.Take();
}

absl::StatusOr<spec::ProposeResponse> DecodeProposeResponse(absl::string_view bytes) {
  Reader r(bytes, "compact propose answer");
  uint32_t n = 0;
  if (absl::Status s = r.GetCount(kMinProposeResultBytes, &n); !s.ok()) return s;
  spec::ProposeResponse response;
  response.results.resize(n);
  for (spec::ProposeResult& result : response.results) {
    uint64_t id = 0;
    for (absl::Status s :
         {r.Get(&id), GetStatus(&r, &result.status), GetDraft(&r, &result.draft)}) {
      if (!s.ok()) return s;
    }
    result.id = id;
  }
  for (absl::Status s : {r.Get(&response.compute_seconds), r.Finish()}) {
    if (!s.ok()) return s;
  }
  return response;
}

}  // namespace splitspec::rpc
