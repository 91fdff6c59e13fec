// Progress line for `splitspec bench` (see bench_progress.h).
#include "tools/bench_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace splitspec::tools::bench {

ProgressLine::ProgressLine(std::string label, double duration_s, const LoadCounters* counters,
                           bool enabled)
    : label_(std::move(label)),
      duration_s_(duration_s),
      counters_(counters),
      enabled_(enabled),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {
  if (enabled_) thread_ = std::thread([this] { Loop(); });
}

ProgressLine::~ProgressLine() { Stop(); }

void ProgressLine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (enabled_) Draw(/*final_line=*/true);
}

void ProgressLine::Loop() {
  const auto period = tty_ ? std::chrono::milliseconds(250) : std::chrono::milliseconds(10000);
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    lock.unlock();
    Draw(/*final_line=*/false);
    lock.lock();
  }
}

void ProgressLine::Draw(bool final_line) {
  constexpr int kWidth = 30;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double fraction = duration_s_ > 0 ? std::clamp(elapsed / duration_s_, 0.0, 1.0) : 1.0;
  const int filled = static_cast<int>(fraction * kWidth + 0.5);
  const std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
  const int64_t sent = counters_->sent.load();
  const int64_t done = counters_->done.load();
  const int64_t failed = counters_->failed.load();
  const char* phase = final_line ? "done    " : (elapsed < duration_s_ ? "sending " : "draining");
  std::fprintf(
      stderr, "%s%-14s [%s] %6.1fs %s sent %lld done %lld failed %lld in-flight %lld tok %lld%s",
      tty_ ? "\r" : "", label_.c_str(), bar.c_str(), elapsed, phase, static_cast<long long>(sent),
      static_cast<long long>(done), static_cast<long long>(failed),
      static_cast<long long>(sent - done - failed),
      static_cast<long long>(counters_->output_tokens.load()), (final_line || !tty_) ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace splitspec::tools::bench
