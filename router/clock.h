// Time as the router core sees it. The live router reads a steady clock; the simulator and
// tests drive a virtual clock that the simulated workers advance by their modelled latency,
// so the same RouterCore code measures step times in both worlds.
#ifndef SPLITSPEC_ROUTER_CLOCK_H_
#define SPLITSPEC_ROUTER_CLOCK_H_

#include <atomic>
#include <chrono>

namespace splitspec::router {

// Thread-safety: implementations must be safe to read from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual double NowSeconds() const = 0;
};

class SteadyClock : public Clock {
 public:
  double NowSeconds() const override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// Manually advanced time. Thread-safe (atomic), though only one thread should advance it.
class VirtualClock : public Clock {
 public:
  double NowSeconds() const override { return now_.load(std::memory_order_relaxed); }
  void Advance(double seconds) {
    if (seconds > 0) now_.store(now_.load(std::memory_order_relaxed) + seconds,
                                std::memory_order_relaxed);
  }
  void AdvanceTo(double seconds) {
    if (seconds > NowSeconds()) now_.store(seconds, std::memory_order_relaxed);
  }

 private:
  std::atomic<double> now_{0.0};
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_CLOCK_H_
