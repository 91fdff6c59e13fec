// `none`, `static:K` and `static-tree:D:N`: the baselines; and the default DecideProposals
// (a chain of each Decide k).
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

std::vector<int32_t> StaticTreePolicy::Decide(const PolicyInput& input) {
  std::vector<int32_t> k(input.requests.size(), 0);
  for (size_t i = 0; i < k.size(); ++i) k[i] = input.requests[i].speculative ? depth_ : 0;
  return k;
}

std::vector<ProposalChoice> StaticTreePolicy::DecideProposals(const PolicyInput& input) {
  std::vector<ProposalChoice> choices(input.requests.size());
  for (size_t i = 0; i < choices.size(); ++i) {
    if (input.requests[i].speculative) choices[i] = ProposalChoice{depth_, nodes_};
  }
  return choices;
}

std::vector<ProposalChoice> SpeculationPolicy::DecideProposals(const PolicyInput& input) {
  std::vector<ProposalChoice> choices;
  for (int32_t k : Decide(input)) choices.push_back(ProposalChoice::Chain(k));
  return choices;
}

}  // namespace splitspec::router
