// NgramMatcher: prompt lookup decoding. Over a request's token history (prompt + output,
// growing by appends, shrinking by truncation on rollback) it finds the longest suffix of
// length in [min_n, max_n] that occurred earlier in the history and proposes the tokens that
// followed its most recent earlier occurrence.
//
// Why an incremental index rather than a scan per query: every appended token registers the
// n-grams ending at it (one hash per n, computed backwards in O(max_n)) in a map from n-gram
// to its most recent end position, with a per-(position, n) link to the previous occurrence.
// A query then costs O(max_n) hash look-ups plus O(k) to copy the proposal, independent of
// the history length; truncation unlinks the removed positions in O(max_n) each, which is
// exact (the map returns to the state it had at that length). Hash hits are checked against
// the tokens, so a 64-bit collision can only cost time, never a wrong proposal.
#ifndef SPLITSPEC_COMMON_SPEC_NGRAM_MATCHER_H_
#define SPLITSPEC_COMMON_SPEC_NGRAM_MATCHER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace splitspec::spec {

struct NgramMatcherOptions {
  int32_t min_n = 1;
  int32_t max_n = 4;
};

struct NgramMatch {
  int32_t n = 0;                // length of the matched suffix; 0 when nothing matched
  int64_t source_end = -1;      // history index of the last token of the earlier occurrence
  std::vector<int32_t> tokens;  // up to k tokens that followed it
};

// Not thread-safe: one per request, used by one thread at a time.
class NgramMatcher {
 public:
  static constexpr int32_t kMaxN = 64;

  // INVALID_ARGUMENT unless 1 <= min_n <= max_n <= kMaxN.
  static absl::StatusOr<NgramMatcher> Create(const NgramMatcherOptions& options);

  void Append(int32_t token);
  void Append(absl::Span<const int32_t> tokens);
  // Makes the indexed history equal `history`: keeps the prefix that agrees, truncates the
  // rest and indexes what follows (usually just the tokens committed since the last call).
  absl::Status SyncTo(absl::Span<const int32_t> history);
  // Drops the history from position `new_size` on. INVALID_ARGUMENT if new_size is negative
  // or beyond the current size.
  absl::Status Truncate(int64_t new_size);

  // The longest suffix (n from max_n down to min_n) with an earlier occurrence (which may
  // overlap the suffix), and up to k tokens that followed its most recent one. Empty match
  // for k <= 0 or when no suffix recurs.
  NgramMatch Propose(int32_t k) const;

  // For draft trees: what followed earlier occurrences of the history's suffix, up to k tokens
  // each, from the longest matching n down to min_n, most recent occurrence first, at most
  // `max_occurrences` of them (each earlier position once, whichever n found it).
  std::vector<std::vector<int32_t>> Continuations(int32_t k, int32_t max_occurrences) const;
  // The same for another sequence's suffix: what followed occurrences in this index of the
  // last n tokens of `tail` (n from max_n down to min_n).
  std::vector<std::vector<int32_t>> ContinuationsOf(absl::Span<const int32_t> tail, int32_t k,
                                                    int32_t max_occurrences) const;

  int64_t size() const { return static_cast<int64_t>(history_.size()); }
  absl::Span<const int32_t> history() const { return history_; }
  const NgramMatcherOptions& options() const { return options_; }

 private:
  explicit NgramMatcher(const NgramMatcherOptions& options);
  int32_t n_lengths() const { return options_.max_n - options_.min_n + 1; }
  // Hashes of the n-grams ending at `end` for n = min_n..max_n (0 where end + 1 < n).
  void HashesEndingAt(int64_t end, uint64_t* out) const;
  // Hashes of the n-grams ending `tail` (0 where tail is shorter than n).
  void HashesOfTail(absl::Span<const int32_t> tail, uint64_t* out) const;
  // Continuations of occurrences of tail's n-grams that end before `before`.
  std::vector<std::vector<int32_t>> Collect(absl::Span<const int32_t> tail, int64_t before, int32_t k,
                                            int32_t max_occurrences) const;
  bool SameNgram(int64_t end_a, int64_t end_b, int32_t n) const;

  NgramMatcherOptions options_;
  std::vector<int32_t> history_;
  // last_end_[n - min_n]: most recent end position of each n-gram of length n, by hash.
  std::vector<absl::flat_hash_map<uint64_t, int64_t>> last_end_;
  // previous_end_[end * n_lengths() + (n - min_n)]: the previous end position of an n-gram
  // of length n with the same hash, or -1.
  std::vector<int64_t> previous_end_;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_COMMON_SPEC_NGRAM_MATCHER_H_
