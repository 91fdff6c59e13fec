// Load generation for `splitspec bench` (see bench_runner.h).
#include "tools/bench_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "tools/bench_arrivals.h"
#include "tools/bench_progress.h"

namespace splitspec::tools::bench {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// One arrival waiting for a client thread.
struct Arrival {
  int64_t index;       // position in the schedule (and the record slot)
  double scheduled_s;  // when it was due
};

class ArrivalQueue {
 public:
  void Push(Arrival a) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(a);
    }
    cv_.notify_one();
  }
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  // False once closed and empty.
  bool Pop(Arrival* out) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return closed_ || !queue_.empty(); });
    if (queue_.empty()) return false;
    *out = queue_.front();
    queue_.pop_front();
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Arrival> queue_;  // guarded by mu_
  bool closed_ = false;        // guarded by mu_
};

void Count(const RequestRecord& r, LoadCounters* counters) {
  if (r.ok) {
    counters->done.fetch_add(1);
    counters->output_tokens.fetch_add(r.output_tokens);
  } else {
    counters->failed.fetch_add(1);
  }
}

LoadResult RunOpenLoop(RouterClient* client, const std::vector<WorkloadItem>& items,
                       const LoadOptions& o, LoadCounters* counters) {
  const std::vector<double> schedule =
      ArrivalSchedule(o.rate, o.duration_s, o.seed, o.max_requests);
  std::vector<RequestRecord> records(schedule.size());
  std::vector<char> sent(schedule.size(), 0);
  const Clock::time_point start = Clock::now();
  const Clock::time_point send_until = start + Seconds(o.duration_s);
  const Clock::time_point deadline = send_until + Seconds(o.drain_s);

  ArrivalQueue queue;
  std::vector<std::thread> workers;
  const int threads = std::max(1, std::min<int>(o.max_inflight, static_cast<int>(schedule.size())));
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      Arrival a;
      while (queue.Pop(&a)) {
        // An arrival that waited for a free client past the sending window is dropped: sending
        // it would stretch the run beyond its bound.
        if (Clock::now() >= send_until) continue;
        const WorkloadItem& item = items[static_cast<size_t>(a.index) % items.size()];
        counters->sent.fetch_add(1);
        RequestRecord r = client->Generate(MakeRequest(item, o), start, deadline);
        r.item_id = item.id;
        r.scheduled_s = a.scheduled_s;
        Count(r, counters);
        records[static_cast<size_t>(a.index)] = std::move(r);
        sent[static_cast<size_t>(a.index)] = 1;  // each slot has one writer; read after join
      }
    });
  }
  for (size_t i = 0; i < schedule.size(); ++i) {
    std::this_thread::sleep_until(start + Seconds(schedule[i]));
    queue.Push(Arrival{static_cast<int64_t>(i), schedule[i]});
  }
  queue.Close();
  for (std::thread& w : workers) w.join();

  LoadResult out;
  out.records.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    if (sent[i]) {
      out.records.push_back(std::move(records[i]));
    } else {
      ++out.dropped;
    }
  }
  std::sort(out.records.begin(), out.records.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.send_s < b.send_s; });
  return out;
}

LoadResult RunClosedLoop(RouterClient* client, const std::vector<WorkloadItem>& items,
                         const LoadOptions& o, LoadCounters* counters) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point send_until = start + Seconds(o.duration_s);
  const Clock::time_point deadline = send_until + Seconds(o.drain_s);
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::vector<RequestRecord> records;  // guarded by mu
  std::vector<std::thread> clients;
  for (int c = 0; c < o.concurrency; ++c) {
    clients.emplace_back([&] {
      for (Clock::time_point now = Clock::now(); now < send_until; now = Clock::now()) {
        const int64_t index = next.fetch_add(1);
        if (index >= o.max_requests) break;
        const WorkloadItem& item = items[static_cast<size_t>(index) % items.size()];
        counters->sent.fetch_add(1);
        RequestRecord r = client->Generate(MakeRequest(item, o), start, deadline);
        r.item_id = item.id;
        // Closed loop: due the moment the client is free (when it checked the window).
        r.scheduled_s = std::chrono::duration<double>(now - start).count();
        Count(r, counters);
        std::lock_guard<std::mutex> lock(mu);
        records.push_back(std::move(r));
      }
    });
  }
  for (std::thread& c : clients) c.join();
  std::sort(records.begin(), records.end(),
            [](const RequestRecord& a, const RequestRecord& b) { return a.send_s < b.send_s; });
  return LoadResult{std::move(records), 0};
}

}  // namespace

v1::GenerateRequest MakeRequest(const WorkloadItem& item, const LoadOptions& options) {
  v1::GenerateRequest request;
  request.set_text(item.prompt);
  request.set_max_tokens(item.max_tokens > 0 ? item.max_tokens : options.default_max_tokens);
  request.set_ignore_eos(options.ignore_eos);
  request.set_drafter(options.drafter);
  return request;  // sampling unset: greedy, so every policy must produce the same tokens
}

LoadResult RunLoad(RouterClient* client, const std::vector<WorkloadItem>& items,
                   const LoadOptions& options) {
  LoadCounters counters;
  ProgressLine progress(options.label, options.duration_s, &counters, options.progress);
  LoadResult result = options.concurrency > 0 ? RunClosedLoop(client, items, options, &counters)
                                              : RunOpenLoop(client, items, options, &counters);
  progress.Stop();
  return result;
}

}  // namespace splitspec::tools::bench
