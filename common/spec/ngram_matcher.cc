// NgramMatcher: the incremental n-gram index and its queries.
#include "common/spec/ngram_matcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace splitspec::spec {
namespace {

// Murmur3's 64-bit finaliser: a bijective mix so that similar n-grams land far apart.
inline uint64_t FMix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

inline uint64_t Extend(uint64_t h, int32_t token) {
  return FMix64(h * 0x9e3779b97f4a7c15ULL + static_cast<uint32_t>(token) + 1);
}

}  // namespace

NgramMatcher::NgramMatcher(const NgramMatcherOptions& options)
    : options_(options), last_end_(options.max_n - options.min_n + 1) {}

absl::StatusOr<NgramMatcher> NgramMatcher::Create(const NgramMatcherOptions& options) {
  if (options.min_n < 1 || options.max_n < options.min_n || options.max_n > kMaxN) {
    return absl::InvalidArgumentError(
        absl::StrCat("n-gram lengths need 1 <= min_n <= max_n <= ", kMaxN, ", got min_n ",
                     options.min_n, ", max_n ", options.max_n));
  }
  return NgramMatcher(options);
}

void NgramMatcher::HashesEndingAt(int64_t end, uint64_t* out) const {
  uint64_t h = 0x2545f4914f6cdd1dULL;
  for (int32_t n = 1; n <= options_.max_n; ++n) {
    if (end - n + 1 < 0) {
      // Too short: the rest of out stays 0 and is never read (callers check the length).
      for (int32_t m = std::max(n, options_.min_n); m <= options_.max_n; ++m) {
        out[m - options_.min_n] = 0;
      }
      return;
    }
    h = Extend(h, history_[end - n + 1]);
    if (n >= options_.min_n) out[n - options_.min_n] = h;
  }
}

bool NgramMatcher::SameNgram(int64_t end_a, int64_t end_b, int32_t n) const {
  for (int32_t i = 0; i < n; ++i) {
    if (history_[end_a - i] != history_[end_b - i]) return false;
  }
  return true;
}

void NgramMatcher::Append(int32_t token) {
  const int64_t end = size();
  history_.push_back(token);
  const int32_t n_len = n_lengths();
  previous_end_.resize(previous_end_.size() + n_len, -1);
  uint64_t hashes[kMaxN];
  HashesEndingAt(end, hashes);
  for (int32_t n = options_.min_n; n <= options_.max_n && n <= end + 1; ++n) {
    const int32_t idx = n - options_.min_n;
    auto [it, inserted] = last_end_[idx].try_emplace(hashes[idx], end);
    if (!inserted) {
      previous_end_[end * n_len + idx] = it->second;
      it->second = end;
    }
  }
}

void NgramMatcher::Append(absl::Span<const int32_t> tokens) {
  history_.reserve(history_.size() + tokens.size());
  for (int32_t token : tokens) Append(token);
}

absl::Status NgramMatcher::SyncTo(absl::Span<const int32_t> history) {
  const size_t limit = std::min(history_.size(), history.size());
  size_t common = 0;
  while (common < limit && history_[common] == history[common]) ++common;
  if (absl::Status s = Truncate(static_cast<int64_t>(common)); !s.ok()) return s;
  Append(history.subspan(common));
  return absl::OkStatus();
}

absl::Status NgramMatcher::Truncate(int64_t new_size) {
  if (new_size < 0 || new_size > size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot truncate a history of ", size(), " tokens to ", new_size));
  }
  const int32_t n_len = n_lengths();
  uint64_t hashes[kMaxN];
  // Undo appends newest first, so each n-gram's most recent end is the one being removed.
  for (int64_t end = size() - 1; end >= new_size; --end) {
    HashesEndingAt(end, hashes);
    for (int32_t n = options_.min_n; n <= options_.max_n && n <= end + 1; ++n) {
      const int32_t idx = n - options_.min_n;
      const int64_t previous = previous_end_[end * n_len + idx];
      if (previous < 0) {
        last_end_[idx].erase(hashes[idx]);
      } else {
        last_end_[idx][hashes[idx]] = previous;
      }
    }
    history_.pop_back();
  }
  previous_end_.resize(static_cast<size_t>(new_size) * n_len);
  return absl::OkStatus();
}

NgramMatch NgramMatcher::Propose(int32_t k) const {
  NgramMatch match;
  const int64_t len = size();
  if (k <= 0 || len < 2) return match;
  const int64_t last = len - 1;
  const int32_t n_len = n_lengths();
  uint64_t hashes[kMaxN];
  HashesEndingAt(last, hashes);
  // An earlier occurrence ends at <= last - 1, so n <= len - 1.
  const int32_t longest = static_cast<int32_t>(std::min<int64_t>(options_.max_n, len - 1));
  for (int32_t n = longest; n >= options_.min_n; --n) {
    const int32_t idx = n - options_.min_n;
    const auto it = last_end_[idx].find(hashes[idx]);
    if (it == last_end_[idx].end()) continue;  // cannot happen: the suffix itself is indexed
    // The chain starts at the suffix itself; skip it and any hash collisions.
    for (int64_t end = it->second; end >= 0; end = previous_end_[end * n_len + idx]) {
      if (end >= last || !SameNgram(end, last, n)) continue;
      match.n = n;
      match.source_end = end;
      const int64_t stop = std::min<int64_t>(len, end + 1 + static_cast<int64_t>(k));
      match.tokens.assign(history_.begin() + end + 1, history_.begin() + stop);
      return match;
    }
  }
  return match;
}

void NgramMatcher::HashesOfTail(absl::Span<const int32_t> tail, uint64_t* out) const {
  const int64_t len = static_cast<int64_t>(tail.size());
  uint64_t h = 0x2545f4914f6cdd1dULL;  // as HashesEndingAt, so the hashes meet
  for (int32_t n = 1; n <= options_.max_n; ++n) {
    if (len - n < 0) {
      for (int32_t m = std::max(n, options_.min_n); m <= options_.max_n; ++m) out[m - options_.min_n] = 0;
      return;
    }
    h = Extend(h, tail[len - n]);
    if (n >= options_.min_n) out[n - options_.min_n] = h;
  }
}

std::vector<std::vector<int32_t>> NgramMatcher::Collect(absl::Span<const int32_t> tail, int64_t before, int32_t k,
                                                        int32_t max_occurrences) const {
  std::vector<std::vector<int32_t>> continuations;
  const int64_t len = size();
  const int64_t tail_len = static_cast<int64_t>(tail.size());
  if (k <= 0 || max_occurrences <= 0 || tail_len == 0 || len == 0) return continuations;
  const int32_t n_len = n_lengths();
  uint64_t hashes[kMaxN];
  HashesOfTail(tail, hashes);
  std::vector<int64_t> seen;
  const int32_t longest = static_cast<int32_t>(std::min<int64_t>(options_.max_n, tail_len));
  for (int32_t n = longest; n >= options_.min_n; --n) {
    const int32_t idx = n - options_.min_n;
    const auto it = last_end_[idx].find(hashes[idx]);
    if (it == last_end_[idx].end()) continue;
    for (int64_t end = it->second; end >= 0; end = previous_end_[end * n_len + idx]) {
      if (end >= before || end + 1 >= len) continue;  // nothing follows it (yet)
      bool same = true;
      for (int32_t i = 0; i < n && same; ++i) same = history_[end - i] == tail[tail_len - 1 - i];
      if (!same || std::find(seen.begin(), seen.end(), end) != seen.end()) continue;
      seen.push_back(end);
      const int64_t stop = std::min<int64_t>(len, end + 1 + static_cast<int64_t>(k));
      continuations.emplace_back(history_.begin() + end + 1, history_.begin() + stop);
      if (static_cast<int32_t>(continuations.size()) >= max_occurrences) return continuations;
    }
  }
  return continuations;
}

std::vector<std::vector<int32_t>> NgramMatcher::Continuations(int32_t k, int32_t max_occurrences) const {
  if (size() < 2) return {};
  // Occurrences ending before the last token (the suffix itself is indexed too).
  return Collect(history_, size() - 1, k, max_occurrences);
}

std::vector<std::vector<int32_t>> NgramMatcher::ContinuationsOf(absl::Span<const int32_t> tail, int32_t k,
                                                                int32_t max_occurrences) const {
  return Collect(tail, size(), k, max_occurrences);
}

}  // namespace splitspec::spec
