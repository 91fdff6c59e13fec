// `splitspec bench-engine`: decode throughput at several batch sizes, the cost of one forward
// feeding 1..16 tokens (what verification costs), and achieved weight-read bandwidth as a share
// of the machine's read bandwidth ceiling measured in the same run, both as a whole and step by
// step, each batch-1 step against a probe pass right after it (CPU only: on --device cuda the
// GPU's copy bandwidth is not measured yet, so no bound is printed).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/engine/backend.h"
#include "common/engine/cpu/bandwidth.h"
#include "common/engine/cpu/host_memory.h"
#include "common/engine/cuda/select_backend.h"
#include "common/engine/model/llama_model.h"
#include "common/engine/timed_backend.h"
#include "tools/command.h"
#include "tools/engine_device.h"

namespace splitspec::tools {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The value at quantile q (0..1) of `values`, nearest rank.
double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5)];
}
double Median(std::vector<double> values) { return Quantile(std::move(values), 0.5); }

struct Bench {
  engine::LlamaModel& model;
  engine::KvCache& kv;
  int context;
  engine::SeqId next_seq = 1;

  std::vector<int32_t> Tokens(int n, int salt) const {
    std::vector<int32_t> tokens(n);
    for (int i = 0; i < n; ++i) tokens[i] = (i * 7919 + salt * 104729 + 3) % model.config().vocab_size;
    return tokens;
  }

  std::vector<engine::SeqId> Prefill(int batch) {
    std::vector<engine::SeqId> seqs;
    for (int b = 0; b < batch; ++b) {
      const engine::SeqId seq = next_seq++;
      if (!kv.AddSequence(seq).ok()) std::abort();
      engine::ForwardResult ignored;
      const absl::Status s = model.Forward({engine::SequenceStep{seq, Tokens(context, b), {}, {}}}, kv, &ignored);
      if (!s.ok()) {
        std::fprintf(stderr, "prefill failed: %s\n", std::string(s.message()).c_str());
        std::exit(1);
      }
      seqs.push_back(seq);
    }
    return seqs;
  }

  // Seconds of decode step `s` of `seqs` (1 token each, logits for every sequence).
  double TimedStep(const std::vector<engine::SeqId>& seqs, int s) {
    std::vector<engine::SequenceStep> work;
    for (size_t b = 0; b < seqs.size(); ++b) {
      work.push_back({seqs[b], {static_cast<int32_t>((s * 31 + b) % model.config().vocab_size)}, {}, {0}});
    }
    engine::ForwardResult result;
    const auto start = Clock::now();
    if (!model.Forward(work, kv, &result).ok()) std::abort();
    return Seconds(start, Clock::now());
  }

  // Seconds of each of `steps` decode steps of `batch` sequences, after two that warm caches;
  // `between` runs after every timed step, untimed.
  template <typename BetweenFn>
  std::vector<double> DecodeStepTimes(int batch, int steps, BetweenFn&& between) {
    const std::vector<engine::SeqId> seqs = Prefill(batch);
    std::vector<double> times;
    for (int s = 0; s < steps + 2; ++s) {
      const double seconds = TimedStep(seqs, s);
      if (s < 2) continue;
      times.push_back(seconds);
      between();
    }
    for (engine::SeqId seq : seqs) kv.Release(seq);
    return times;
  }

  // Median seconds per decode step of `batch` sequences.
  double DecodeStep(int batch, int steps) { return Median(DecodeStepTimes(batch, steps, [] {})); }

  // Median seconds of one forward feeding `n` chain tokens of one sequence (logits for all).
  double ForwardTokens(int n, int repeats) {
    const engine::SeqId seq = Prefill(1)[0];
    std::vector<double> times;
    for (int r = 0; r < repeats + 2; ++r) {
      engine::SequenceStep step{seq, Tokens(n, r), {}, {}};
      for (int i = 0; i < n; ++i) step.logit_nodes.push_back(i);
      engine::ForwardResult result;
      const auto start = Clock::now();
      if (!model.Forward({step}, kv, &result).ok()) std::abort();
      if (r >= 2) times.push_back(Seconds(start, Clock::now()));
      if (!kv.Truncate(seq, context).ok()) std::abort();
    }
    kv.Release(seq);
    return Median(std::move(times));
  }
};

// The ceiling above comes from other minutes than the decode steps, and a shared machine's
// bandwidth moves from one minute to the next: each batch-1 step is paired here with one pass
// of every read kernel right after it (ReadProbe::ColdPass: neither the step nor a kernel finds
// its bytes left in the last-level cache by the read before it). Its reads are taken as a share
// of that pass's reading by the kernel with the best median over all the passes
// (engine::cpu::KernelWithBestMedian), and, stricter, of the pass's best kernel, whichever that
// was.
void PrintPairedShare(Bench& bench, double weight_bytes, size_t probe_bytes, int steps) {
  engine::cpu::ReadProbe probe(probe_bytes);
  std::vector<engine::cpu::ReadCeiling> passes;
  const std::vector<double> times = bench.DecodeStepTimes(1, steps, [&] { passes.push_back(probe.ColdPass()); });
  const size_t kernel = engine::cpu::KernelWithBestMedian(passes);
  std::vector<double> kernel_readings, shares, shares_of_best;
  for (size_t i = 0; i < times.size(); ++i) {
    const double read = weight_bytes / times[i] / 1e9;
    kernel_readings.push_back(passes[i].kernels[kernel].gb_per_s);
    shares.push_back(read / kernel_readings.back());
    shares_of_best.push_back(read / passes[i].gb_per_s);
  }
  std::printf("paired: %d decode steps, each followed by one pass of every read kernel (each kernel's pass after a read of "
              "another buffer, as each step comes after the pass); the kernel with the best "
              "median, %s, read %.1f GB/s (median; %.1f-%.1f): a step's reads are %.0f%% of that kernel's pass "
              "after it (median; middle half %.0f-%.0f%%), %.0f%% of the pass's best kernel\n",
              steps, std::string(passes[0].kernels[kernel].name).c_str(), Median(kernel_readings),
              *std::min_element(kernel_readings.begin(), kernel_readings.end()),
              *std::max_element(kernel_readings.begin(), kernel_readings.end()), 100 * Median(shares),
              100 * Quantile(shares, 0.25), 100 * Quantile(shares, 0.75), 100 * Median(shares_of_best));
}

// The step breakdown's matmuls by weight shape, largest first: calls a step, and the median over
// the steps of a call's mean time and of the rate at which those calls read their weights. A
// shape whose rate lags the others points at a call's fixed costs (its threads' fork and join,
// the quantized input, streams starting cold) rather than at reading.
void PrintMatMulsByShape(const std::vector<engine::OpTimes>& per_step) {
  if (per_step.empty()) return;
  std::vector<std::pair<engine::MatMulShape, engine::MatMulShapeTimes>> shapes(
      per_step.back().matmul_by_shape.begin(), per_step.back().matmul_by_shape.end());
  std::sort(shapes.begin(), shapes.end(),
            [](const auto& a, const auto& b) { return a.second.weight_bytes > b.second.weight_bytes; });
  std::printf("matmuls by weight shape (rows x columns: calls a step, median time a call, median read rate):");
  const char* separator = " ";
  for (const auto& [shape, last] : shapes) {
    std::vector<double> call_seconds, read;
    for (const engine::OpTimes& t : per_step) {
      const auto it = t.matmul_by_shape.find(shape);
      if (it == t.matmul_by_shape.end() || it->second.calls == 0 || it->second.seconds <= 0) continue;
      call_seconds.push_back(it->second.seconds / static_cast<double>(it->second.calls));
      read.push_back(static_cast<double>(it->second.weight_bytes) / it->second.seconds / 1e9);
    }
    if (call_seconds.empty()) continue;
    std::printf("%s%lld x %lld: %lld, %.1f us, %.1f GB/s", separator, static_cast<long long>(shape.rows),
                static_cast<long long>(shape.cols), static_cast<long long>(last.calls), Median(call_seconds) * 1e6,
                Median(read));
    separator = "; ";
  }
  std::printf("\n");
}

// The step breakdown's small ops by kind, costliest first: calls a step, the median over the
// steps of a call's mean time and of the kind's time a step.
void PrintSmallOpsByKind(const std::vector<engine::OpTimes>& per_step) {
  if (per_step.empty()) return;
  struct Row {
    std::string kind;
    int64_t calls;
    double call_seconds;
    double step_seconds;
  };
  std::vector<Row> rows;
  for (const auto& [kind, last] : per_step.back().elementwise_by_kind) {
    std::vector<double> call_seconds, step_seconds;
    for (const engine::OpTimes& t : per_step) {
      const auto it = t.elementwise_by_kind.find(kind);
      if (it == t.elementwise_by_kind.end() || it->second.calls == 0) continue;
      call_seconds.push_back(it->second.seconds / static_cast<double>(it->second.calls));
      step_seconds.push_back(it->second.seconds);
    }
    if (!call_seconds.empty()) rows.push_back({kind, last.calls, Median(call_seconds), Median(step_seconds)});
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.step_seconds > b.step_seconds; });
  std::printf("small ops by kind (calls a step, median time a call, median time a step):");
  const char* separator = " ";
  for (const Row& row : rows) {
    std::printf("%s%s: %lld, %.2f us, %.1f us", separator, row.kind.c_str(), static_cast<long long>(row.calls),
                row.call_seconds * 1e6, row.step_seconds * 1e6);
    separator = "; ";
  }
  std::printf("\n");
}

// Batch-1 decode steps with each op timed around its call (engine::TimedBackend): each step's
// seconds and ops, `after_step` run untimed after each. The first timed step also holds the
// warm-up steps' ops (which `after_step` does not follow) and is left out of both.
struct TimedSteps {
  std::vector<double> seconds;
  std::vector<engine::OpTimes> ops;
};

template <typename AfterFn>
TimedSteps TimeDecodeSteps(Bench& bench, engine::TimedBackend& timed, int steps, AfterFn&& after_step) {
  std::vector<engine::OpTimes> per_step;
  timed.ResetTimes();
  timed.set_timing(true);
  const std::vector<double> times = bench.DecodeStepTimes(1, steps, [&] {
    per_step.push_back(timed.times());
    after_step();
    timed.ResetTimes();
  });
  timed.set_timing(false);
  TimedSteps result;
  if (times.size() < 2) return result;  // --steps 1: only the step that held the warm-up
  result.seconds.assign(times.begin() + 1, times.end());
  result.ops.assign(per_step.begin() + 1, per_step.end());
  return result;
}

// The paired steps again (PrintPairedShare), each op timed around its call as in the step
// breakdown below, which splits the paired share in two: how fast the matmuls read their
// weights against the pass after their step, and how much of the step is not weight reading.
// A step that follows a pass finds none of its weights, code or K/V rows in the last-level
// cache, where a step that follows a step finds some, so these figures are not the step
// breakdown's. The timer's two clock reads an op are why the share itself is taken untimed.
void PrintPairedBreakdown(Bench& bench, engine::TimedBackend& timed, double weight_bytes, size_t probe_bytes,
                          int steps) {
  engine::cpu::ReadProbe probe(probe_bytes);
  std::vector<engine::cpu::ReadCeiling> passes;
  const TimedSteps timed_steps = TimeDecodeSteps(bench, timed, steps, [&] { passes.push_back(probe.ColdPass()); });
  if (timed_steps.ops.empty()) return;
  // The pass after the step that held the warm-up goes with it.
  const std::vector<engine::cpu::ReadCeiling> timed_passes(passes.begin() + 1, passes.end());
  const size_t kernel = engine::cpu::KernelWithBestMedian(timed_passes);
  std::vector<double> pass_readings, step_shares, matmul_shares, matmul_parts, attention, elementwise, rest;
  for (size_t i = 0; i < timed_steps.ops.size(); ++i) {
    const engine::OpTimes& t = timed_steps.ops[i];
    const double step_seconds = timed_steps.seconds[i];
    pass_readings.push_back(timed_passes[i].kernels[kernel].gb_per_s);
    step_shares.push_back(weight_bytes / step_seconds / 1e9 / pass_readings.back());
    matmul_shares.push_back(static_cast<double>(t.matmul_weight_bytes) / t.matmul_seconds / 1e9 / pass_readings.back());
    matmul_parts.push_back(t.matmul_seconds / step_seconds);
    attention.push_back(t.attention_seconds);
    elementwise.push_back(t.elementwise_seconds);
    rest.push_back(step_seconds - t.total_seconds());
  }
  std::printf("paired breakdown: %zu more paired steps, each op timed around its call, medians: the pass after a "
              "step read %.1f GB/s (%s); the step's reads %.0f%% of it, the matmuls' reads %.0f%% of it; the matmuls "
              "%.0f%% of the step, attention %.3f ms, the small ops %.3f ms, the rest %.3f ms\n",
              timed_steps.ops.size(), Median(pass_readings), std::string(timed_passes[0].kernels[kernel].name).c_str(),
              100 * Median(step_shares), 100 * Median(matmul_shares), 100 * Median(matmul_parts),
              Median(attention) * 1e3, Median(elementwise) * 1e3, Median(rest) * 1e3);
  PrintMatMulsByShape(timed_steps.ops);
}

// Where a batch-1 step's time goes: each op timed around its call (engine::TimedBackend) over
// `steps` decode steps, medians of each kind a step. Timing costs two clock reads an op. Only
// meaningful where the backend finishes an op before returning (the CPU backend).
void PrintStepBreakdown(Bench& bench, engine::TimedBackend& timed, int steps) {
  const TimedSteps timed_steps = TimeDecodeSteps(bench, timed, steps, [] {});
  if (timed_steps.ops.empty()) return;
  std::vector<double> step, matmul, attention, elementwise, rest, read;
  for (size_t i = 0; i < timed_steps.ops.size(); ++i) {
    const engine::OpTimes& t = timed_steps.ops[i];
    step.push_back(timed_steps.seconds[i]);
    matmul.push_back(t.matmul_seconds);
    attention.push_back(t.attention_seconds);
    elementwise.push_back(t.elementwise_seconds);
    rest.push_back(timed_steps.seconds[i] - t.total_seconds());
    read.push_back(static_cast<double>(t.matmul_weight_bytes) / t.matmul_seconds / 1e9);
  }
  const engine::OpTimes& per = timed_steps.ops.back();
  std::printf("step breakdown: %zu batch-1 decode steps, each op timed around its call, medians: step %.2f ms; "
              "matmuls %.2f ms (%lld calls, %.1f MB of weights read at %.1f GB/s), attention %.3f ms (%lld calls), "
              "norms, RoPE, SiLU, adds, embedding and the logits' copy %.3f ms (%lld calls), the rest of the "
              "forward %.3f ms\n",
              step.size(), Median(step) * 1e3, Median(matmul) * 1e3, static_cast<long long>(per.matmul_calls),
              per.matmul_weight_bytes / 1e6, Median(read), Median(attention) * 1e3,
              static_cast<long long>(per.attention_calls), Median(elementwise) * 1e3,
              static_cast<long long>(per.elementwise_calls), Median(rest) * 1e3);
  PrintMatMulsByShape(timed_steps.ops);
  PrintSmallOpsByKind(timed_steps.ops);
}

// The same weights loaded again by a CPU backend that takes every buffer from the C allocator
// (base pages), batch-1 decode steps alternating with this one's (huge-page chunks,
// cpu/host_memory.h) in one process, so that both see the same minutes of a shared machine.
void PrintBasePagesComparison(Bench& bench, const std::string& model_dir, const engine::ModelLoadOptions& load_options,
                              int threads, engine::DType kv_dtype, int steps) {
  engine::CpuBackendOptions base_options;
  base_options.n_threads = threads;
  base_options.huge_page_chunks = false;
  std::unique_ptr<engine::Backend> backend = engine::CreateCpuBackend(base_options);
  auto model = engine::LlamaModel::Load(model_dir, *backend, load_options);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(model.status().message()).c_str());
    std::exit(1);
  }
  auto kv = (*model)->CreateKvCache((bench.context + steps + 8) / 16 + 4, 16, kv_dtype);
  if (!kv.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(kv.status().message()).c_str());
    std::exit(1);
  }
  Bench base{**model, **kv, bench.context};
  const std::vector<engine::SeqId> base_seqs = base.Prefill(1);
  std::vector<double> base_times;
  int s = 0;
  const std::vector<double> chunk_times =
      bench.DecodeStepTimes(1, steps, [&] { base_times.push_back(base.TimedStep(base_seqs, s++)); });
  const double chunks = Median(chunk_times), base_pages = Median(base_times);
  const double gain = 100.0 * (base_pages / chunks - 1.0);
  std::printf("host memory: batch-1 decode %.2f ms with huge-page chunks, %.2f ms with the C allocator's base pages "
              "(medians of %d steps each, alternating): the chunks %.0f%% %s\n",
              chunks * 1e3, base_pages * 1e3, steps, std::abs(gain), gain >= 0 ? "faster" : "slower");
}

int RunBenchEngine(const Args& args) {
  const std::string model_dir = args.Require("model");
  const int threads = static_cast<int>(args.GetIntInRange("threads", 0, 0, 4096));
  const int context = static_cast<int>(args.GetIntInRange("context", 64, 1, 1 << 20));
  const int steps = static_cast<int>(args.GetIntInRange("steps", 16, 1, 1 << 20));
  const bool f32 = args.Has("f32-weights");
  const std::vector<int> batches = args.GetPositiveIntList("batches", "1,8,32");
  const std::vector<int> forward_tokens = args.GetPositiveIntList("forward-tokens", "1,2,3,4,5,6,8,16");
  const engine::DeviceSpec device = DeviceFlagOrExit(args);
  const engine::WeightQuantization quantize = QuantizeFlagOrExit(args);
  const engine::DType kv_dtype = KvDTypeFlagOrExit(args);
  const bool compare_base_pages = args.Has("compare-base-pages");
  args.CheckAllUsed();
  if (compare_base_pages && device.cuda) {
    std::fprintf(stderr, "error: --compare-base-pages compares CPU host memory; it does not apply to %s\n",
                 device.ToString().c_str());
    return 2;
  }

  std::unique_ptr<engine::Backend> backend = CreateBackendOrExit(device, threads);
  // The model runs on the backend through a timer that stays off except for the step breakdown.
  engine::TimedBackend timed(*backend);
  engine::ModelLoadOptions load_options;
  load_options.weights_to_f32 = f32;
  load_options.quantize = quantize;
  auto model = engine::LlamaModel::Load(model_dir, timed, load_options);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const engine::ModelConfig& c = (*model)->config();
  // A sequence holds the context, then grows by a step at a time or by the longest forward.
  const int longest = std::max(steps, *std::max_element(forward_tokens.begin(), forward_tokens.end()));
  if (static_cast<int64_t>(context) + longest > c.max_position_embeddings) {
    std::fprintf(stderr, "error: --context %d with %d more tokens runs past the model's context of %d positions\n",
                 context, longest, c.max_position_embeddings);
    return 2;
  }
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  auto kv = (*model)->CreateKvCache(max_batch * ((context + steps + 8) / 16 + 2) + 16, 16, kv_dtype);
  if (!kv.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(kv.status().message()).c_str());
    return 1;
  }
  std::printf("model %s: %d layers, hidden %d, heads %d/%d, vocab %d, %.1f MB of weights read per forward\n",
              model_dir.c_str(), c.n_layers, c.hidden_size, c.n_heads, c.n_heads_kv, c.vocab_size,
              (*model)->weight_bytes() / 1e6);
  if (device.cuda) {
    std::printf("device %s, context %d tokens per sequence\n\n", device.ToString().c_str(), context);
  } else {
    std::printf("threads %d, context %d tokens per sequence\n", omp_get_max_threads(), context);
    // Whether the weights got huge pages (common/engine/cpu/host_memory.h): the kernel may refuse them.
    const engine::cpu::HostMemoryUse use = engine::cpu::ReadHostMemoryUse();
    std::printf("host memory: %.1f MB of buffers in huge-page chunks (%.1f MB mapped), %.1f MB of the process in "
                "huge pages (transparent huge pages: %s)\n",
                use.chunk_bytes_used / 1e6, use.chunk_bytes_mapped / 1e6, use.huge_page_bytes / 1e6,
                use.transparent_huge_pages.c_str());
  }
  // The yardstick is the best of several read kernels (engine::cpu::MeasureReadCeiling) over a
  // buffer the size of the weights a decode step reads: a last-level cache can hold a model
  // (480 MiB on one of our machines), and then a DRAM-sized probe is no ceiling at all. Past
  // 1 GiB the working set is beyond any cache and 1 GiB stands for it. A shared machine's
  // bandwidth drifts with its neighbours, so it is measured before and after the decode runs and
  // each kernel keeps its higher reading.
  const size_t probe_bytes =
      std::clamp<size_t>(static_cast<size_t>((*model)->weight_bytes()), size_t{16} << 20, size_t{1} << 30);
  engine::cpu::ReadCeiling ceiling;
  auto measure_ceiling = [&] {
    if (device.cuda) return;
    engine::cpu::ReadCeiling now = engine::cpu::MeasureReadCeiling(probe_bytes);
    ceiling = ceiling.kernels.empty() ? now : engine::cpu::MaxOf(ceiling, now);
  };
  measure_ceiling();
  if (!device.cuda) {
    std::printf("read bandwidth ceiling (%.0f MB read, the weights' size; best of %zu read kernels): %.1f GB/s (%s)\n\n",
                probe_bytes / 1e6, ceiling.kernels.size(), ceiling.gb_per_s, std::string(ceiling.best_kernel).c_str());
  }

  Bench bench{**model, **kv, context};
  std::printf("%-8s %12s %14s\n", "batch", "step ms", "tokens/s");
  double batch1_step = 0;
  for (int batch : batches) {
    const double step = bench.DecodeStep(batch, steps);
    if (batch == 1) batch1_step = step;
    std::printf("%-8d %12.2f %14.1f\n", batch, step * 1e3, batch / step);
  }
  if (batch1_step > 0) {
    const double achieved = (*model)->weight_bytes() / batch1_step / 1e9;
    if (device.cuda) {
      std::printf("\nbatch-1 decode reads weights at %.1f GB/s\n\n", achieved);
    } else {
      measure_ceiling();
      std::printf("\nbatch-1 decode reads weights at %.1f GB/s = %.0f%% of the read ceiling, %.1f GB/s (%s);"
                  " read kernels before and after, best of each:\n",
                  achieved, 100.0 * achieved / ceiling.gb_per_s, ceiling.gb_per_s,
                  std::string(ceiling.best_kernel).c_str());
      for (const engine::cpu::ReadKernelResult& k : ceiling.kernels) {
        std::printf("  %-24s %6.1f GB/s\n", std::string(k.name).c_str(), k.gb_per_s);
      }
      PrintPairedShare(bench, (*model)->weight_bytes(), probe_bytes, steps);
      PrintPairedBreakdown(bench, timed, (*model)->weight_bytes(), probe_bytes, steps);
      PrintStepBreakdown(bench, timed, steps);
      std::printf("\n");
    }
  }
  if (compare_base_pages) {
    PrintBasePagesComparison(bench, model_dir, load_options, threads, kv_dtype, steps);
    std::printf("\n");
  }

  if (!forward_tokens.empty()) std::printf("%-8s %12s %12s\n", "tokens", "forward ms", "x first");
  double one = 0;
  for (int n : forward_tokens) {  // default 2-6: the verify forwards of short chains
    const double t = bench.ForwardTokens(n, steps);
    if (one == 0) one = t;
    std::printf("%-8d %12.2f %12.2f\n", n, t * 1e3, t / one);
  }
  // The CUDA backend reports op failures only through its status: timings of failed ops mean nothing.
  if (absl::Status s = engine::BackendStatus(*backend); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

const RegisterCommand kRegister(
    "bench-engine", "decode tokens/s, verify-forward cost and memory bandwidth of a local model",
    "  --model DIR               model directory (required)\n"
    "  --device cpu|cuda|cuda:N  where the model runs (cpu)\n"
    "  --context N               tokens of context per sequence (64)\n"
    "  --steps N                 timed steps per measurement (16)\n"
    "  --threads N               CPU threads (0 = all cores)\n"
    "  --batches LIST            decode batch sizes, comma-separated (1,8,32)\n"
    "  --forward-tokens LIST     token counts of the timed forwards, comma-separated; the\n"
    "                            first is the ratios' base (1,2,3,4,5,6,8,16)\n"
    "  --f32-weights             load the weights as f32 whatever their file dtype\n"
    "  --quantize none|int8      int8: quantize the matrices at load (Q8_0) (none)\n"
    "  --kv-dtype f32|f16        how the KV cache stores K and V (f16: CPU only) (f32)\n"
    "  --compare-base-pages      also time batch-1 decode of the weights held in base pages,\n"
    "                            steps alternating with the huge-page ones (CPU only)\n",
    RunBenchEngine);

}  // namespace
}  // namespace splitspec::tools
