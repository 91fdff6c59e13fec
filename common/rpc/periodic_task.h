// Runs a callback every `period` on its own thread until destroyed (e.g. a worker reclaiming
// sessions whose lease ran out). The wait is a timer, not synchronisation: destruction wakes
// the thread at once.
//
// Thread-safe: construct and destroy from one thread; the callback runs on the task's thread.
#ifndef SPLITSPEC_COMMON_RPC_PERIODIC_TASK_H_
#define SPLITSPEC_COMMON_RPC_PERIODIC_TASK_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace splitspec::rpc {

class PeriodicTask {
 public:
  PeriodicTask(std::chrono::milliseconds period, std::function<void()> callback)
      : period_(period), callback_(std::move(callback)), thread_([this] { Loop(); }) {}
  ~PeriodicTask() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, period_, [this] { return stop_; })) {
      lock.unlock();
      callback_();
      lock.lock();
    }
  }

  const std::chrono::milliseconds period_;
  const std::function<void()> callback_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it reads are ready
};

// The session reaper of a worker: `reclaim` runs four times per lease (at most every 20 ms), so
// an idle session goes at most a quarter lease after it expired. Null when leases are off
// (lease_seconds <= 0).
inline std::unique_ptr<PeriodicTask> StartLeaseReaper(double lease_seconds, std::function<void()> reclaim) {
  if (lease_seconds <= 0) return nullptr;
  const auto period = std::chrono::milliseconds(std::max<int64_t>(20, static_cast<int64_t>(lease_seconds * 250)));
  return std::make_unique<PeriodicTask>(period, std::move(reclaim));
}

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_PERIODIC_TASK_H_
