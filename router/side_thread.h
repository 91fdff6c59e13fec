// SideThread: one long-lived thread that runs a task while the caller does something else
// (the router's draft-ahead beside the verify call), so a step pays a hand-off to a waiting
// thread, not a thread start.
//
// Thread-safety: Start and Wait are called by one owner thread, alternately.
#ifndef SPLITSPEC_ROUTER_SIDE_THREAD_H_
#define SPLITSPEC_ROUTER_SIDE_THREAD_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace splitspec::router {

class SideThread {
 public:
  SideThread() = default;
  ~SideThread();
  SideThread(const SideThread&) = delete;
  SideThread& operator=(const SideThread&) = delete;

  // Runs `task` on the side thread (started on first use). The previous task must have been
  // waited for.
  void Start(std::function<void()> task);
  // Blocks until the task given to Start has returned; returns at once when none is running.
  void Wait();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> task_;  // set: waiting to run or running
  bool running_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_SIDE_THREAD_H_
