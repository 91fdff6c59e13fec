// Load generation for `splitspec bench` (see bench_runner.h).
#include "tools/bench_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "common/engine/sampling/seed.h"
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

// The arrivals waiting for a client, and when each free client became free. An arrival is
// picked up at max(due, ready time of the client free the longest): which thread pops it, and
// how late the scheduler woke that thread or the one that pushed it, changes nothing. Ready
// times are read under the lock, so a client not yet registered when an arrival is popped
// became free after that moment (the pick-up time is exact, not a guess of thread timing).
class ArrivalQueue {
 public:
  // `clients` clients, every one free from `start`.
  ArrivalQueue(LoadClock* clock, SteadyTime start, int clients) : clock_(clock) {
    for (int c = 0; c < clients; ++c) idle_.insert(start);
  }
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
  // Blocks for the next arrival and assigns it the longest-free client, whose ready time goes
  // to `*free_since`. False once closed and empty. Called only by a thread whose client is
  // free, so there is one to assign.
  bool Pop(Arrival* out, SteadyTime* free_since) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return closed_ || !queue_.empty(); });
    if (queue_.empty()) return false;
    *out = queue_.front();
    queue_.pop_front();
    *free_since = *idle_.begin();
    idle_.erase(idle_.begin());
    return true;
  }
  // The client of an arrival that was not sent is as free as before.
  void Unassign(SteadyTime free_since) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.insert(free_since);
  }
  // The client's request has ended: free from now.
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.insert(clock_->Now());
  }

 private:
  LoadClock* const clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Arrival> queue_;       // guarded by mu_
  std::multiset<SteadyTime> idle_;  // ready times of the free clients; guarded by mu_
  bool closed_ = false;             // guarded by mu_
};

class SteadyLoadClock final : public LoadClock {
 public:
  SteadyTime Now() override { return Clock::now(); }
  void SleepUntil(SteadyTime t) override { std::this_thread::sleep_until(t); }
};

void Count(const RequestRecord& r, LoadCounters* counters) {
  if (r.ok) {
    counters->done.fetch_add(1);
    counters->output_tokens.fetch_add(r.output_tokens);
  } else {
    counters->failed.fetch_add(1);
  }
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
  LoadResult out;
  out.scheduled = static_cast<int64_t>(records.size());
  out.records = std::move(records);
  return out;
}

}  // namespace

v1::GenerateRequest MakeRequest(const WorkloadItem& item, const LoadOptions& options) {
  v1::GenerateRequest request;
  request.set_text(item.prompt);
  request.set_max_tokens(item.max_tokens > 0 ? item.max_tokens : options.default_max_tokens);
  request.set_ignore_eos(options.ignore_eos);
  request.set_drafter(options.drafter);
  if (options.temperature > 0) {
    v1::SamplingParams* sampling = request.mutable_sampling();
    sampling->set_temperature(options.temperature);
    sampling->set_top_k(options.top_k);
    sampling->set_seed(engine::NamedSeed(options.seed, item.id));
  }
  return request;  // sampling unset: greedy, so every policy must produce the same tokens
}

LoadResult RunOpenLoop(const SendFn& send, const std::vector<WorkloadItem>& items,
                       const LoadOptions& o, const std::vector<double>& schedule, LoadClock* clock,
                       LoadCounters* counters) {
  LoadCounters own_counters;
  if (counters == nullptr) counters = &own_counters;
  std::vector<RequestRecord> records(schedule.size());
  std::vector<char> sent(schedule.size(), 0);
  const SteadyTime start = clock->Now();
  const SteadyTime send_until = start + Seconds(o.duration_s);
  const SteadyTime deadline = send_until + Seconds(o.drain_s);

  const int threads = std::max(1, std::min<int>(o.max_inflight, static_cast<int>(schedule.size())));
  ArrivalQueue queue(clock, start, threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      Arrival a;
      SteadyTime free_since;
      while (queue.Pop(&a, &free_since)) {
        // Picked up when it was due and a client was free. Past the window it is dropped (it
        // waited that long for a busy client, or was due after it): sending it would stretch
        // the run beyond its bound. A late wakeup of the thread that pushed it or of this one
        // is no reason: only the due time and the client's ready time count.
        const SteadyTime due = start + Seconds(a.scheduled_s);
        if (std::max(due, free_since) >= send_until) {
          queue.Unassign(free_since);
          continue;
        }
        const WorkloadItem& item = items[static_cast<size_t>(a.index) % items.size()];
        counters->sent.fetch_add(1);
        RequestRecord r = send(MakeRequest(item, o), start, deadline);
        r.item_id = item.id;
        r.scheduled_s = a.scheduled_s;
        Count(r, counters);
        records[static_cast<size_t>(a.index)] = std::move(r);
        sent[static_cast<size_t>(a.index)] = 1;  // each slot has one writer; read after join
        queue.Release();
      }
    });
  }
  for (size_t i = 0; i < schedule.size(); ++i) {
    clock->SleepUntil(start + Seconds(schedule[i]));
    queue.Push(Arrival{static_cast<int64_t>(i), schedule[i]});
  }
  queue.Close();
  for (std::thread& w : workers) w.join();

  LoadResult out;
  out.scheduled = static_cast<int64_t>(schedule.size());
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

LoadResult RunLoad(RouterClient* client, const std::vector<WorkloadItem>& items,
                   const LoadOptions& options) {
  LoadCounters counters;
  ProgressLine progress(options.label, options.duration_s, &counters, options.progress);
  LoadResult result;
  if (options.concurrency > 0) {
    result = RunClosedLoop(client, items, options, &counters);
  } else {
    SteadyLoadClock clock;
    const SendFn send = [client](const v1::GenerateRequest& request, SteadyTime run_start,
                                 SteadyTime deadline) {
      return client->Generate(request, run_start, deadline);
    };
    result = RunOpenLoop(
        send, items, options,
        ArrivalSchedule(options.rate, options.duration_s, options.seed, options.max_requests),
        &clock, &counters);
  }
  progress.Stop();
  return result;
}

}  // namespace splitspec::tools::bench
