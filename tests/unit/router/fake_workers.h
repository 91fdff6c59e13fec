// In-process fake workers for router tests. The "target model" is a fixed deterministic
// function of the history (NextToken), so greedy generation has one right answer per prompt
// (ReferenceGeneration) and a router bug that loses, duplicates or reorders a token shows.
// Both fakes keep real per-request sessions with the pending-token bookkeeping of
// common/spec/worker_api.h and complain (INVALID_ARGUMENT / FAILED_PRECONDITION, and a
// recorded protocol error) when the router breaks the contract.
//
// Thread-safety: thread-compatible; the router calls them from its loop thread only.
#ifndef SPLITSPEC_TESTS_UNIT_ROUTER_FAKE_WORKERS_H_
#define SPLITSPEC_TESTS_UNIT_ROUTER_FAKE_WORKERS_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "router/clock.h"
#include "router/router_core.h"
#include "router/worker_clients.h"

namespace splitspec::router::testing {

constexpr int32_t kFakeVocab = 1000;

inline int32_t NextToken(const std::vector<int32_t>& h) {
  const int64_t a = h.empty() ? 1 : h.back();
  const int64_t b = h.size() < 2 ? 3 : h[h.size() - 2];
  return static_cast<int32_t>((a * 31 + b * 17 + static_cast<int64_t>(h.size()) * 7 + 11) %
                              kFakeVocab);
}

inline std::vector<int32_t> ReferenceGeneration(std::vector<int32_t> prompt, int32_t n) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t t = NextToken(prompt);
    out.push_back(t);
    prompt.push_back(t);
  }
  return out;
}

class FakeVerifier : public VerifierClient {
 public:
  absl::StatusOr<std::vector<spec::PrefillResult>> Prefill(
      const std::vector<spec::PrefillItem>& items) override {
    std::lock_guard<std::mutex> lock(mu);
    ++prefill_calls;
    if (fail_prefill || down) return absl::UnavailableError("fake prefill failure");
    std::vector<spec::PrefillResult> out;
    for (const auto& item : items) {
      // Per-item refusals, as the real verifier answers them: no session, the batch goes on.
      if (refuse_prefill_ids.count(item.id)) {
        out.push_back({item.id, 0, absl::InvalidArgumentError("fake: refused item")});
        continue;
      }
      if (max_context > 0 && static_cast<int32_t>(item.tokens.size()) >= max_context) {
        out.push_back({item.id, 0, absl::InvalidArgumentError("fake: prompt fills the context")});
        continue;
      }
      if (sessions.count(item.id)) return absl::InvalidArgumentError("session exists");
      Session s;
      s.kv = item.tokens;
      s.pending = NextToken(s.kv);
      sessions[item.id] = s;
      out.push_back({item.id, s.pending, absl::OkStatus()});
    }
    return out;
  }

  absl::StatusOr<spec::VerifyResponse> Verify(const std::vector<spec::VerifyItem>& items) override {
    std::lock_guard<std::mutex> lock(mu);
    ++verify_calls;
    batch_sizes.push_back(static_cast<int32_t>(items.size()));
    if (fail_verify || down) return absl::UnavailableError("fake verify failure");
    spec::VerifyResponse resp;
    for (const auto& item : items) {
      auto it = sessions.find(item.id);
      if (it == sessions.end()) {
        protocol_errors.push_back(absl::StrCat("verify of unknown session ", item.id));
        return absl::InvalidArgumentError("unknown session");
      }
      const auto& d = item.draft;
      if (!d.tokens.empty()) saw_draft_ids.insert(item.id);
      if (max_context > 0 &&
          static_cast<int32_t>(it->second.kv.size() + 1 + d.tokens.size()) > max_context) {
        spec::VerifyResult refused;
        refused.id = item.id;
        refused.status = absl::OutOfRangeError("fake: past the context");
        ++out_of_range_items;
        resp.results.push_back(refused);
        continue;
      }
      if (refuse_verify_ids.count(item.id)) {
        spec::VerifyResult refused;
        refused.id = item.id;
        refused.status = absl::InvalidArgumentError("fake: refused item");
        resp.results.push_back(refused);
        continue;
      }
      for (size_t j = 0; j < d.tokens.size(); ++j) {
        if (d.parents.size() != d.tokens.size() || d.parents[j] != static_cast<int32_t>(j) - 1) {
          protocol_errors.push_back("malformed chain");
          return absl::InvalidArgumentError("malformed tree");
        }
      }
      Session& s = it->second;
      std::vector<int32_t> cur = s.kv;
      cur.push_back(s.pending);
      spec::VerifyResult r;
      r.id = item.id;
      for (int32_t t : d.tokens) {
        if (t != NextToken(cur)) break;
        cur.push_back(t);
        r.tokens.push_back(t);
        ++r.accept_length;
      }
      const int32_t bonus = NextToken(cur);
      r.tokens.push_back(bonus);
      s.kv = cur;
      s.pending = bonus;
      resp.results.push_back(r);
    }
    beside_drafts.push_back(beside_now_);
    resp.compute_seconds = compute_seconds * (beside_now_ ? slowdown_beside_drafts : 1.0);
    if (clock != nullptr) clock->Advance(resp.compute_seconds + transport_seconds);
    resp.total_blocks = total_blocks;
    return resp;
  }

  // overlaps_work: as a step socket client, runs the router's side work inside the call (here
  // before answering, as the call's answer is read after it), on the calling thread.
  bool OverlapsWorkWithVerify() const override { return overlaps_work; }
  absl::StatusOr<spec::VerifyResponse> VerifyWhile(const std::vector<spec::VerifyItem>& items,
                                                   const std::function<void()>& work) override {
    if (!overlaps_work) return VerifierClient::VerifyWhile(items, work);
    ++work_in_calls;
    work_threads.insert(std::this_thread::get_id());
    in_flight = true;
    const int before = beside_counter != nullptr ? *beside_counter : 0;
    work();
    in_flight = false;
    beside_now_ = beside_counter != nullptr && *beside_counter != before;
    auto response = Verify(items);
    beside_now_ = false;
    return response;
  }

  absl::Status Release(const std::vector<spec::RequestId>& ids) override {
    std::lock_guard<std::mutex> lock(mu);
    if (down) return absl::UnavailableError("fake verifier down");
    for (auto id : ids) {
      released.insert(id);
      sessions.erase(id);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<spec::WorkerInfo> Info() override {
    if (down) return absl::UnavailableError("fake verifier down");
    spec::WorkerInfo info;
    info.model_name = "fake-target";
    info.vocab_size = kFakeVocab;
    info.total_blocks = total_blocks;
    info.free_blocks = total_blocks;
    info.block_size = 16;
    info.max_draft_tokens = 16;
    info.live_sessions = static_cast<int32_t>(sessions.size());
    info.max_context_tokens = max_context;
    return info;
  }

  struct Session {
    std::vector<int32_t> kv;
    int32_t pending = 0;
  };
  // Guards `sessions` and the counters against a drafter's cross-check, which a prefill's
  // Propose makes while the verifier's prefill runs on another thread.
  mutable std::mutex mu;
  std::map<spec::RequestId, Session> sessions;
  std::set<spec::RequestId> released;
  std::vector<int32_t> batch_sizes;
  std::vector<std::string> protocol_errors;
  int32_t total_blocks = 4096;
  bool fail_prefill = false;
  bool fail_verify = false;
  bool down = false;  // every call fails, as with a killed process
  int32_t max_context = 0;  // > 0: reported by Info and enforced per item like the real one
  std::set<spec::RequestId> refuse_prefill_ids;  // answered INVALID_ARGUMENT per item
  std::set<spec::RequestId> refuse_verify_ids;
  int out_of_range_items = 0;
  int prefill_calls = 0;
  int verify_calls = 0;
  bool overlaps_work = false;
  bool in_flight = false;  // overlaps_work: the router's side work is running inside a call
  // The compute time each Verify reports; with `clock` set, the call also advances it by that.
  double compute_seconds = 0;
  VirtualClock* clock = nullptr;
  // With `clock` set, each Verify also advances it by this, unreported: the call's transport.
  double transport_seconds = 0;
  // overlaps_work: a call whose side work made Propose calls (counted on `beside_counter`, a
  // drafter's `calls`), drafts made ahead beside it, computes this many times as long, as on a
  // GPU both workers share; `beside_drafts` records each Verify's verdict.
  const int* beside_counter = nullptr;
  double slowdown_beside_drafts = 1.0;
  std::vector<bool> beside_drafts;
  int work_in_calls = 0;
  std::set<std::thread::id> work_threads;
  std::set<spec::RequestId> saw_draft_ids;  // requests verified with a non-empty draft

 private:
  bool beside_now_ = false;  // the running call has drafts made ahead beside it (VerifyWhile)
};

// Proposes each token right with probability `accuracy` (a fixed hash decides, so runs are
// reproducible), otherwise a wrong one.
class FakeDrafter : public DrafterClient {
 public:
  explicit FakeDrafter(double accuracy = 0.7, uint64_t salt = 1)
      : accuracy_(accuracy), salt_(salt) {}
  void set_accuracy(double accuracy) { accuracy_ = accuracy; }
  // The compute time each call reports: this many seconds per level drafted (its deepest item).
  double seconds_per_level = 0;
  // When set, each Propose advances it by the compute time it reports, plus transport_seconds
  // (unreported: the call's transport).
  VirtualClock* clock = nullptr;
  double transport_seconds = 0;

  // Counted apart (beside_verify_calls), then as any Propose.
  absl::StatusOr<spec::ProposeResponse> ProposeBesideVerify(const std::vector<spec::ProposeItem>& items) override {
    ++beside_verify_calls;
    // A decode step's drafts made ahead (a prefill's items start from nothing known).
    if (std::all_of(items.begin(), items.end(), [](const spec::ProposeItem& item) { return item.known_length > 0; })) {
      decode_ahead_call_sizes.push_back(items.size());
    }
    return Propose(items);
  }

  absl::StatusOr<spec::ProposeResponse> Propose(const std::vector<spec::ProposeItem>& items) override {
    ++calls;
    if (down) return absl::UnavailableError("fake drafter down");
    if (failures_left > 0) {
      --failures_left;
      return absl::UnavailableError("fake drafter down");
    }
    spec::ProposeResponse resp;
    int32_t levels = 0;
    for (const auto& item : items) levels = std::max(levels, item.shape.depth);
    resp.compute_seconds = seconds_per_level * levels;
    if (clock != nullptr) clock->Advance(resp.compute_seconds + transport_seconds);
    for (const auto& item : items) {
      proposed_ids.insert(item.id);
      sent[item.id].push_back({static_cast<int32_t>(item.new_tokens.size()), item.shape.depth});
      if (refuse_ids.count(item.id)) {
        spec::ProposeResult refused;
        refused.id = item.id;
        refused.status = absl::FailedPreconditionError("fake: refused item");
        resp.results.push_back(refused);
        continue;
      }
      std::vector<int32_t>& seen = sessions[item.id];
      if (item.known_length == 0) {
        seen.clear();
      } else if (item.known_length > static_cast<int32_t>(seen.size())) {
        protocol_errors.push_back(absl::StrCat("known_length past what was seen for ", item.id));
        return absl::FailedPreconditionError("known_length mismatch");
      } else {
        seen.resize(item.known_length);
      }
      const int32_t new_tokens = static_cast<int32_t>(item.new_tokens.size());
      if (item.assumed_tokens < 0 || item.assumed_tokens > new_tokens ||
          item.known_length + new_tokens - item.assumed_tokens < 1 || item.alternatives > item.assumed_tokens) {
        protocol_errors.push_back(absl::StrCat("bad hypothesis for ", item.id));
        return absl::InvalidArgumentError("bad hypothesis");
      }
      // Assumed tokens are drafted after but not committed (spec::ProposeItem::assumed_tokens).
      const auto assumed_begin = item.new_tokens.end() - item.assumed_tokens;
      seen.insert(seen.end(), item.new_tokens.begin(), assumed_begin);
      const std::vector<int32_t> hypothesis(assumed_begin, item.new_tokens.end());
      alternatives_asked += item.alternatives;
      if (item.new_tokens.empty()) protocol_errors.push_back("propose without the pending token");
      if (verifier != nullptr) {  // the drafter must see exactly the verifier's committed state
        std::lock_guard<std::mutex> lock(verifier->mu);
        auto v = verifier->sessions.find(item.id);
        // A prefill's Propose runs beside the verifier's prefill: the prompt, without the token
        // the prefill emits.
        const bool prefill = item.known_length == 0 && (v == verifier->sessions.end() || v->second.kv == seen);
        if (v != verifier->sessions.end() && !prefill) {
          std::vector<int32_t> expect = v->second.kv;
          expect.push_back(v->second.pending);
          if (expect != seen) protocol_errors.push_back(absl::StrCat("drafter desync on ", item.id));
        }
        if (prefill) ++prefill_proposes;
      }
      spec::ProposeResult res;
      res.id = item.id;
      std::vector<int32_t> cur = seen;
      cur.insert(cur.end(), hypothesis.begin(), hypothesis.end());
      res.draft = DraftAfter(item.id, cur, item.shape.depth);
      // The other outcomes, first position first: where the hypothesis has the target's token
      // the other one is wrong, and where it has a wrong one the other is the target's (this
      // drafter's best other choice is always right).
      for (int32_t j = 0; j < item.alternatives; ++j) {
        std::vector<int32_t> assumed(hypothesis.begin(), hypothesis.begin() + j);
        const int32_t right = NextToken(Concat(seen, assumed));
        assumed.push_back(hypothesis[j] == right ? (right + 1) % kFakeVocab : right);
        res.alternatives.push_back({assumed, DraftAfter(item.id, Concat(seen, assumed), item.shape.depth)});
      }
      auto spoil = spoil_drafts.find(item.id);
      if (spoil != spoil_drafts.end()) spoil->second(res.draft);
      resp.results.push_back(std::move(res));
    }
    return resp;
  }

  absl::Status Release(const std::vector<spec::RequestId>& ids) override {
    for (auto id : ids) {
      released.insert(id);
      sessions.erase(id);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<spec::WorkerInfo> Info() override {
    spec::WorkerInfo info;
    info.model_name = "fake-draft";
    info.vocab_size = kFakeVocab;
    info.max_draft_tokens = 16;
    return info;
  }

  const FakeVerifier* verifier = nullptr;  // optional: cross-checks the drafter's history
  int64_t alternatives_asked = 0;          // ProposeItem::alternatives, summed over items
  std::vector<size_t> decode_ahead_call_sizes;  // items of each decode step's ProposeBesideVerify
  std::map<spec::RequestId, std::vector<int32_t>> sessions;
  std::set<spec::RequestId> released;
  std::set<spec::RequestId> proposed_ids;
  std::vector<std::string> protocol_errors;
  int failures_left = 0;
  bool down = false;  // Propose fails, as with a killed process
  std::set<spec::RequestId> refuse_ids;  // answered FAILED_PRECONDITION per item
  // Rewrites the draft returned for a request (malformed trees and the like).
  std::map<spec::RequestId, std::function<void(spec::DraftProposal&)>> spoil_drafts;
  int calls = 0;
  int beside_verify_calls = 0;  // of them, made while a verify call was in flight
  int64_t tokens_proposed = 0;
  int prefill_proposes = 0;  // Proposes made beside the verifier's prefill (cross-checked only)
  struct Sent {
    int32_t new_tokens = 0;
    int32_t depth = 0;
  };
  std::map<spec::RequestId, std::vector<Sent>> sent;  // per request, each Propose item in order

 private:
  // A chain of `depth` after `history`: each token the target's with chance accuracy_.
  spec::DraftProposal DraftAfter(spec::RequestId id, std::vector<int32_t> cur, int32_t depth) {
    spec::DraftProposal draft;
    for (int32_t j = 0; j < depth; ++j) {
      const int32_t right = NextToken(cur);
      // The router's random instance id (the id's high bits) stays out of the hash: a test
      // then sees the same accepts in every run.
      const uint64_t sequence = id & ((uint64_t{1} << RouterCore::kSequenceBits) - 1);
      const uint64_t h = (cur.size() * 0x9E3779B97F4A7C15ULL) ^ (sequence * 0xBF58476D1CE4E5B9ULL) ^ salt_;
      const double u = static_cast<double>((h >> 11) % 1000003) / 1000003.0;
      const int32_t t = u < accuracy_ ? right : (right + 1) % kFakeVocab;
      draft.tokens.push_back(t);
      draft.parents.push_back(j - 1);
      cur.push_back(t);
      ++tokens_proposed;
    }
    return draft;
  }
  static std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  double accuracy_;
  uint64_t salt_;
};

}  // namespace splitspec::router::testing

#endif  // SPLITSPEC_TESTS_UNIT_ROUTER_FAKE_WORKERS_H_
