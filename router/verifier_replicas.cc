// Verifier replica table (see verifier_replicas.h).
#include "router/verifier_replicas.h"

#include <algorithm>

namespace splitspec::router {

VerifierReplicas::VerifierReplicas(std::vector<VerifierClient*> clients, double probe_interval_seconds)
    : probe_interval_(probe_interval_seconds) {
  for (VerifierClient* client : clients) {
    VerifierReplica replica;
    replica.client = client;
    replicas_.push_back(replica);
  }
}

int VerifierReplicas::Add(VerifierClient* client, double now) {
  VerifierReplica replica;
  replica.client = client;
  replica.next_probe_at = now;
  replicas_.push_back(replica);
  return size() - 1;
}

int VerifierReplicas::Find(const VerifierClient* client) const {
  for (int i = 0; i < size(); ++i) {
    if (replicas_[i].client == client && !replicas_[i].retired) return i;
  }
  return -1;
}

void VerifierReplicas::Retire(int i) {
  VerifierReplica& r = replicas_[i];
  r.retired = true;
  r.up = false;
  r.total_blocks = 0;
}

int VerifierReplicas::Choose(int32_t blocks) const {
  int best = -1;
  int32_t best_free = -1;
  for (int i = 0; i < size(); ++i) {
    const VerifierReplica& r = replicas_[i];
    const int32_t free_blocks = r.total_blocks - r.reserved_blocks;
    if (!r.up || free_blocks < blocks) continue;
    if (free_blocks > best_free) {
      best = i;
      best_free = free_blocks;
    }
  }
  return best;
}

void VerifierReplicas::MarkDown(int i, double now, bool deadline_exceeded) {
  VerifierReplica& r = replicas_[i];
  r.up = false;
  r.timed_out = deadline_exceeded;
  r.next_probe_at = now + probe_interval_;
}

std::vector<int> VerifierReplicas::DueForProbe(double now) const {
  std::vector<int> due;
  for (int i = 0; i < size(); ++i) {
    if (!replicas_[i].up && !replicas_[i].retired && replicas_[i].next_probe_at <= now) due.push_back(i);
  }
  return due;
}

void VerifierReplicas::ProbeFailed(int i, double now) { replicas_[i].next_probe_at = now + probe_interval_; }

void VerifierReplicas::MarkUp(int i, int32_t total_blocks) {
  VerifierReplica& r = replicas_[i];
  if (r.timed_out) r.timeout_scale = std::min(64.0, r.timeout_scale * 2);
  r.timed_out = false;
  r.up = true;
  r.total_blocks = total_blocks;
  r.stale_sessions.clear();
}

bool VerifierReplicas::AnyUp() const {
  return std::any_of(replicas_.begin(), replicas_.end(), [](const VerifierReplica& r) { return r.up; });
}

int32_t VerifierReplicas::MaxTotalBlocks() const {
  int32_t best = 0;
  for (const VerifierReplica& r : replicas_) best = std::max(best, r.total_blocks);
  return best;
}

int32_t VerifierReplicas::UpTotalBlocks() const {
  int32_t sum = 0;
  for (const VerifierReplica& r : replicas_) sum += r.up ? r.total_blocks : 0;
  return sum;
}

int32_t VerifierReplicas::ReservedBlocks() const {
  int32_t sum = 0;
  for (const VerifierReplica& r : replicas_) sum += r.reserved_blocks;
  return sum;
}

double VerifierReplicas::SecondsToNextProbe(double now) const {
  double best = -1;
  for (const VerifierReplica& r : replicas_) {
    if (r.up) continue;
    const double wait = std::max(0.0, r.next_probe_at - now);
    if (best < 0 || wait < best) best = wait;
  }
  return best;
}

}  // namespace splitspec::router
