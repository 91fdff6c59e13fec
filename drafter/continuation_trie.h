// ContinuationTrie: the continuations a lookup proposer found (what followed earlier
// occurrences of the current suffix) merged into one tree of distinct token paths, each node
// counting the continuations through it. A draft tree is cut from it best first: the most
// frequent nodes (ties: the one seen in the most recent continuation), within a depth, a
// per-node branching and a node budget; a node's score is its share of its parent's count (how
// often, after the parent, the history went this way).
//
// Not thread-safe; built per request per step.
#ifndef SPLITSPEC_DRAFTER_CONTINUATION_TRIE_H_
#define SPLITSPEC_DRAFTER_CONTINUATION_TRIE_H_

#include <cstdint>
#include <vector>

#include "common/spec/worker_api.h"

namespace splitspec::drafter {

class ContinuationTrie {
 public:
  // `continuations` most recent first.
  explicit ContinuationTrie(const std::vector<std::vector<int32_t>>& continuations);

  // Parents precede children; scores in (0, 1].
  spec::DraftProposal Cut(int32_t depth, int32_t branching, int32_t max_nodes) const;

 private:
  struct Node {
    int32_t token = 0;
    int32_t parent = -1;  // trie index, -1 = root
    int32_t depth = 0;
    int32_t count = 0;
    int32_t first_seen = 0;  // index of the most recent continuation through it
    std::vector<int32_t> children;
  };
  std::vector<Node> nodes_;
  std::vector<int32_t> root_children_;
  int32_t root_count_ = 0;
};

}  // namespace splitspec::drafter

#endif  // SPLITSPEC_DRAFTER_CONTINUATION_TRIE_H_
