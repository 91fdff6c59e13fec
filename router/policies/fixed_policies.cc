// `none` and `static:K`: the baselines.
#include "router/policies/policies.h"

namespace splitspec::router {

std::vector<int32_t> NonePolicy::Decide(const PolicyInput& input) {
  return std::vector<int32_t>(input.requests.size(), 0);
}

std::vector<int32_t> StaticPolicy::Decide(const PolicyInput& input) {
  std::vector<int32_t> k(input.requests.size(), 0);
  for (size_t i = 0; i < k.size(); ++i) k[i] = input.requests[i].speculative ? k_ : 0;
  return k;
}

}  // namespace splitspec::router
