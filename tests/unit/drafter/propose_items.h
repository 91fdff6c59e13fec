// Small builders the drafter core's tests share: a Propose item, a proposer's task and a token
// concatenation.
#ifndef SPLITSPEC_TESTS_UNIT_DRAFTER_PROPOSE_ITEMS_H_
#define SPLITSPEC_TESTS_UNIT_DRAFTER_PROPOSE_ITEMS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "common/spec/worker_api.h"
#include "drafter/proposer.h"

namespace splitspec::drafter::testing {

// Request `id`'s Propose item: the router knew `known` of its tokens, sends `new_tokens` after
// them, and asks for a chain of `depth`.
inline spec::ProposeItem Item(spec::RequestId id, int32_t known, std::vector<int32_t> new_tokens, int32_t depth) {
  spec::ProposeItem item;
  item.id = id;
  item.known_length = known;
  item.new_tokens = std::move(new_tokens);
  item.shape.depth = depth;
  return item;
}

// A proposer's task for request `id` drafting after `history` within `shape`.
inline ProposeTask Task(spec::RequestId id, const std::vector<int32_t>* history, spec::ProposalShape shape) {
  ProposeTask task;
  task.id = id;
  task.history = history;
  task.shape = shape;
  return task;
}

// a followed by b.
inline std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace splitspec::drafter::testing

#endif  // SPLITSPEC_TESTS_UNIT_DRAFTER_PROPOSE_ITEMS_H_
