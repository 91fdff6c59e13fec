// Session leases (see session_leases.h).
#include "common/spec/session_leases.h"

namespace splitspec::spec {

std::vector<RequestId> SessionLeases::TakeExpired(double now) {
  std::vector<RequestId> expired;
  if (lease_seconds_ <= 0) return expired;
  for (auto it = last_used_.begin(); it != last_used_.end();) {
    if (now - it->second > lease_seconds_) {
      expired.push_back(it->first);
      it = last_used_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

}  // namespace splitspec::spec
