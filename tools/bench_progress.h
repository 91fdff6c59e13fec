// The progress line `splitspec bench` draws on stderr while a load level runs: a bar over the
// sending window, then a drain countdown, with sent / done / failed / in-flight counts. On a
// terminal it redraws in place a few times a second; otherwise it prints a line every 10 s so
// logs stay short.
//
// Thread-safety: LoadCounters are atomics, updated by any thread; ProgressLine owns one drawing
// thread, started by the constructor and joined by Stop() (or the destructor).
#ifndef SPLITSPEC_TOOLS_BENCH_PROGRESS_H_
#define SPLITSPEC_TOOLS_BENCH_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace splitspec::tools::bench {

struct LoadCounters {
  std::atomic<int64_t> sent{0};
  std::atomic<int64_t> done{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> output_tokens{0};
};

class ProgressLine {
 public:
  ProgressLine(std::string label, double duration_s, const LoadCounters* counters, bool enabled);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Draws the final state and ends the line.
  void Stop();

 private:
  void Loop();
  void Draw(bool final_line);

  const std::string label_;
  const double duration_s_;
  const LoadCounters* counters_;
  const bool enabled_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace splitspec::tools::bench

#endif  // SPLITSPEC_TOOLS_BENCH_PROGRESS_H_
