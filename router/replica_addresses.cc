// Replica lists with dns:/// names (see replica_addresses.h).
#include "router/replica_addresses.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace splitspec::router {
namespace {

std::vector<std::string> SortedUnique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

absl::StatusOr<ReplicaAddresses> ReplicaAddresses::Create(const std::string& targets,
                                                          Resolver resolve,
                                                          bool names_must_resolve) {
  ReplicaAddresses out(std::move(resolve));
  for (absl::string_view piece : absl::StrSplit(targets, ',', absl::SkipWhitespace())) {
    Entry entry;
    entry.target = std::string(absl::StripAsciiWhitespace(piece));
    entry.is_name = absl::StartsWith(entry.target, "dns:///");
    if (entry.is_name) {
      absl::StatusOr<std::vector<std::string>> resolved = out.resolve_(entry.target);
      if (resolved.ok()) entry.addresses = SortedUnique(*std::move(resolved));
      const bool malformed = absl::IsInvalidArgument(resolved.status());
      if (malformed || (names_must_resolve && !resolved.ok())) return resolved.status();
      if (names_must_resolve && entry.addresses.empty()) {
        return absl::UnavailableError(entry.target + " resolves to no address");
      }
      out.names_.push_back(out.entries_.size());
    } else {
      entry.addresses = {entry.target};
    }
    out.entries_.push_back(std::move(entry));
  }
  if (out.entries_.empty()) return absl::InvalidArgumentError("the replica list names no address");
  out.Collect();
  return out;
}

void ReplicaAddresses::Collect() {
  current_.clear();
  std::set<std::string> seen;
  for (const Entry& entry : entries_) {
    for (const std::string& address : entry.addresses) {
      if (seen.insert(address).second) current_.push_back(address);
    }
  }
}

std::string ReplicaAddresses::ServerNameOf(const std::string& address) const {
  for (const Entry& entry : entries_) {
    if (!std::binary_search(entry.addresses.begin(), entry.addresses.end(), address)) continue;
    if (!entry.is_name) return "";
    std::string host = entry.target.substr(7, entry.target.rfind(':') - 7);  // dns:///HOST:PORT
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    return host;
  }
  return "";
}

ReplicaAddresses::Change ReplicaAddresses::Refresh() {
  const std::vector<std::string> before = SortedUnique(current_);
  for (size_t i : names_) {
    Entry& entry = entries_[i];
    absl::StatusOr<std::vector<std::string>> resolved = resolve_(entry.target);
    if (resolved.ok() && !resolved->empty()) entry.addresses = SortedUnique(*std::move(resolved));
  }
  Collect();
  const std::vector<std::string> after = SortedUnique(current_);
  Change change;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(change.added));
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                      std::back_inserter(change.removed));
  return change;
}

}  // namespace splitspec::router
