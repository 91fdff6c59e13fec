// SmartSpec's search over FCFS-prefix candidate batches.
#include "router/candidate_batches.h"

#include <utility>

namespace splitspec::router {

BatchChoice BestFcfsPrefix(const LatencyModel& model, const std::vector<GoodputItem>& items,
                           int32_t max_k, int32_t min_size, bool per_request) {
  // The search itself lives in GoodputModel, next to the goodput maths it relies on.
  GoodputModel::Prefix p = GoodputModel(model, items, max_k).BestPrefix(min_size, per_request);
  BatchChoice choice;
  choice.size = p.size;
  choice.k = std::move(p.k);
  choice.k.resize(items.size(), 0);
  choice.goodput = p.goodput;
  return choice;
}

}  // namespace splitspec::router
