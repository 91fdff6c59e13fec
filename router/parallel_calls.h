// Runs n independent calls at once (one per verifier replica), so a slow replica delays only
// the step's wall time by its own call, not the sum of all calls. Call 0 runs on the calling
// thread; with n == 1 no thread is started at all (the common single-replica case).
#ifndef SPLITSPEC_ROUTER_PARALLEL_CALLS_H_
#define SPLITSPEC_ROUTER_PARALLEL_CALLS_H_

#include <cstddef>
#include <future>
#include <vector>

namespace splitspec::router {

template <typename Fn>
void RunInParallel(size_t n, const Fn& fn) {
  std::vector<std::future<void>> others;
  for (size_t i = 1; i < n; ++i) others.push_back(std::async(std::launch::async, [&fn, i] { fn(i); }));
  if (n > 0) fn(0);
  for (std::future<void>& f : others) f.get();
}

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_PARALLEL_CALLS_H_
