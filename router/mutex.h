// A std::mutex with Abseil's thread-safety annotations, and a condition variable for it.
// Why not absl::Mutex: Debian's prebuilt Abseil is not built with ThreadSanitizer
// annotations, so TSan cannot see its lock edges and reports false races; std::mutex goes
// through pthread, which TSan intercepts. Thread-safe (it is a mutex).
#ifndef SPLITSPEC_ROUTER_MUTEX_H_
#define SPLITSPEC_ROUTER_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace splitspec::router {

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

class CondVar {
 public:
  // Waits (with `mu` held by the caller) until pred() or the timeout; returns pred().
  template <typename Pred>
  bool WaitFor(Mutex* mu, std::chrono::nanoseconds timeout, Pred pred) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool result = cv_.wait_for(lock, timeout, pred);
    lock.release();  // the caller's MutexLock still owns it
    return result;
  }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_MUTEX_H_
