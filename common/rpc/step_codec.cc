// The step socket's compact encoding of Verify and Propose (see step_codec.h).
#include "common/rpc/step_codec.h"

#include <cstdint>
#include <cstring>
#include <initializer_list>
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
  // A count, then each item written by `put_one(item)`.
  template <typename T, typename PutOne>
  void PutList(const std::vector<T>& items, PutOne put_one) {
    Put(static_cast<uint32_t>(items.size()));
    for (const T& item : items) put_one(item);
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
  // A count, then that many items read by `read_one(&item)`. Each item takes at least
  // `min_item_bytes`, so a count the bytes left cannot hold is refused before allocating.
  template <typename T, typename ReadOne>
  absl::Status GetList(size_t min_item_bytes, std::vector<T>* items, ReadOne read_one) {
    uint32_t n = 0;
    if (absl::Status s = GetCount(min_item_bytes, &n); !s.ok()) return s;
    items->resize(n);
    for (T& item : *items) {
      if (absl::Status s = read_one(&item); !s.ok()) return s;
    }
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
    sizeof(uint64_t) + 6 * sizeof(int32_t) + kArrayBytes + 3 * 4 + sizeof(uint64_t);
constexpr size_t kMinAlternativeBytes = kArrayBytes + kDraftBytes;
constexpr size_t kMinProposeResultBytes = sizeof(uint64_t) + kStatusBytes + kDraftBytes + kArrayBytes;

// The first error of reads made in order. A read after a failed one still runs, bounds-checked
// on the bytes left; whatever it reads is dropped with the message.
absl::Status FirstError(std::initializer_list<absl::Status> reads) {
  for (const absl::Status& s : reads) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void PutStatus(const absl::Status& status, Writer* w) {
  w->Put(static_cast<int32_t>(status.code()));
  w->PutString(status.message());
}

absl::Status GetStatus(Reader* r, absl::Status* status) {
  int32_t code = 0;
  std::string message;
  if (absl::Status s = FirstError({r->Get(&code), r->GetString(&message)}); !s.ok()) return s;
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
  return FirstError({r->GetArray(&draft->tokens), r->GetArray(&draft->parents),
                     r->GetArray(&draft->probs), r->GetArray(&draft->scores)});
}

}  // namespace

std::string EncodeVerifyItems(const std::vector<spec::VerifyItem>& items) {
  Writer w;
  w.PutList(items, [&w](const spec::VerifyItem& item) {
    w.Put(static_cast<uint64_t>(item.id));
    PutDraft(item.draft, &w);
  });
  return w.Take();
}

absl::StatusOr<std::vector<spec::VerifyItem>> DecodeVerifyItems(absl::string_view bytes) {
  Reader r(bytes, "compact verify request");
  std::vector<spec::VerifyItem> items;
  const absl::Status read = FirstError(
      {r.GetList(kMinVerifyItemBytes, &items,
                 [&r](spec::VerifyItem* item) {
                   uint64_t id = 0;
                   const absl::Status s = FirstError({r.Get(&id), GetDraft(&r, &item->draft)});
                   item->id = id;
                   return s;
                 }),
       r.Finish()});
  if (!read.ok()) return read;
  return items;
}

std::string EncodeVerifyResponse(const spec::VerifyResponse& response) {
  Writer w;
  w.PutList(response.results, [&w](const spec::VerifyResult& result) {
    w.Put(static_cast<uint64_t>(result.id));
    w.Put(static_cast<int32_t>(result.accept_length));
    PutStatus(result.status, &w);
    w.PutArray(result.tokens);
  });
  w.Put(response.compute_seconds);
  w.Put(static_cast<int32_t>(response.free_blocks));
  w.Put(static_cast<int32_t>(response.total_blocks));
  return w.Take();
}

absl::StatusOr<spec::VerifyResponse> DecodeVerifyResponse(absl::string_view bytes) {
  Reader r(bytes, "compact verify answer");
  spec::VerifyResponse response;
  const absl::Status read =
      FirstError({r.GetList(kMinVerifyResultBytes, &response.results,
                            [&r](spec::VerifyResult* result) {
                              uint64_t id = 0;
                              const absl::Status s = FirstError(
                                  {r.Get(&id), r.Get(&result->accept_length),
                                   GetStatus(&r, &result->status), r.GetArray(&result->tokens)});
                              result->id = id;
                              return s;
                            }),
                  r.Get(&response.compute_seconds), r.Get(&response.free_blocks),
                  r.Get(&response.total_blocks), r.Finish()});
  if (!read.ok()) return read;
  return response;
}

std::string EncodeProposeItems(const std::vector<spec::ProposeItem>& items) {
  Writer w;
  w.PutList(items, [&w](const spec::ProposeItem& item) {
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
    w.Put(static_cast<int32_t>(item.assumed_tokens));
    w.Put(static_cast<int32_t>(item.alternatives));
  });
  return w.Take();
}

absl::StatusOr<std::vector<spec::ProposeItem>> DecodeProposeItems(absl::string_view bytes) {
  Reader r(bytes, "compact propose request");
  std::vector<spec::ProposeItem> items;
  const absl::Status read = FirstError(
      {r.GetList(kMinProposeItemBytes, &items,
                 [&r](spec::ProposeItem* item) {
                   uint64_t id = 0, seed = 0;
                   int32_t top_k = 0;
                   const absl::Status s = FirstError(
                       {r.Get(&id), r.Get(&item->known_length), r.GetArray(&item->new_tokens),
                        r.Get(&item->shape.depth), r.Get(&item->shape.branching),
                        r.Get(&item->shape.max_nodes), r.Get(&item->sampling.temperature),
                        r.Get(&top_k), r.Get(&item->sampling.top_p), r.Get(&seed),
                        r.Get(&item->assumed_tokens), r.Get(&item->alternatives)});
                   item->id = id;
                   item->sampling.top_k = top_k;
                   item->sampling.seed = seed;
                   // As the protobuf messages read them (common/rpc/convert.cc).
                   if (item->shape.branching == 0) item->shape.branching = 1;
                   if (item->sampling.top_p == 0.0f) item->sampling.top_p = 1.0f;
                   return s;
                 }),
       r.Finish()});
  if (!read.ok()) return read;
  return items;
}

std::string EncodeProposeResponse(const spec::ProposeResponse& response) {
  Writer w;
  w.PutList(response.results, [&w](const spec::ProposeResult& result) {
    w.Put(static_cast<uint64_t>(result.id));
    PutStatus(result.status, &w);
    PutDraft(result.draft, &w);
    w.PutList(result.alternatives, [&w](const spec::AlternativeDraft& alternative) {
      w.PutArray(alternative.assumed);
      PutDraft(alternative.draft, &w);
    });
  });
  w.Put(response.compute_seconds);
  return w.Take();
}

absl::StatusOr<spec::ProposeResponse> DecodeProposeResponse(absl::string_view bytes) {
  Reader r(bytes, "compact propose answer");
  spec::ProposeResponse response;
  const absl::Status read = FirstError(
      {r.GetList(kMinProposeResultBytes, &response.results,
                 [&r](spec::ProposeResult* result) {
                   uint64_t id = 0;
                   const absl::Status s = FirstError(
                       {r.Get(&id), GetStatus(&r, &result->status), GetDraft(&r, &result->draft),
                        r.GetList(kMinAlternativeBytes, &result->alternatives,
                                  [&r](spec::AlternativeDraft* alternative) {
                                    return FirstError(
                                        {r.GetArray(&alternative->assumed), GetDraft(&r, &alternative->draft)});
                                  })});
                   result->id = id;
                   return s;
                 }),
       r.Get(&response.compute_seconds), r.Finish()});
  if (!read.ok()) return read;
  return response;
}

}  // namespace splitspec::rpc
