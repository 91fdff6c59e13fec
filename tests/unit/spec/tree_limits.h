// The draft-tree limits the speculative core's tests build trees under.
#ifndef SPLITSPEC_TESTS_UNIT_SPEC_TREE_LIMITS_H_
#define SPLITSPEC_TESTS_UNIT_SPEC_TREE_LIMITS_H_

#include <cstdint>

#include "common/spec/draft_tree.h"

namespace splitspec::spec::testing {

// Token ids in [0, vocab), at most `max_nodes` nodes (DraftTreeLimits' own default).
inline DraftTreeLimits Limits(int32_t vocab, int32_t max_nodes = DraftTreeLimits{}.max_nodes) {
  DraftTreeLimits limits;
  limits.vocab_size = vocab;
  limits.max_nodes = max_nodes;
  return limits;
}

}  // namespace splitspec::spec::testing

#endif  // SPLITSPEC_TESTS_UNIT_SPEC_TREE_LIMITS_H_
