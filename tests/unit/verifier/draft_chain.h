// A chain draft (each token the child of the one before) for the verifier's tests.
#ifndef SPLITSPEC_TESTS_UNIT_VERIFIER_DRAFT_CHAIN_H_
#define SPLITSPEC_TESTS_UNIT_VERIFIER_DRAFT_CHAIN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/spec/worker_api.h"

namespace splitspec::verifier::testing {

inline spec::DraftProposal Chain(const std::vector<int32_t>& tokens) {
  spec::DraftProposal draft;
  draft.tokens = tokens;
  for (size_t i = 0; i < tokens.size(); ++i) draft.parents.push_back(static_cast<int32_t>(i) - 1);
  return draft;
}

}  // namespace splitspec::verifier::testing

#endif  // SPLITSPEC_TESTS_UNIT_VERIFIER_DRAFT_CHAIN_H_
