// Batch-1 decode of splitspec's engine and llama.cpp in one process, step for step: each pair
// of steps times one decode of each engine back to back (which goes first alternates), so the
// two see the same minute of a machine whose memory bandwidth moves by 2x from one minute to
// the next, where runs seconds apart (compare.sh) do not. Both engines run on the same libgomp
// threads. Protocol otherwise as bench-engine and step_bench: prefill `context` tokens, two
// untimed steps, then `steps` timed ones with the context growing by one a step, logits of the
// one token.
//
//   paired_bench SPLITSPEC_MODEL_DIR MODEL.gguf [--quantize int8] [threads] [context] [steps]
//
// Prints each engine's median step, the median of the pairs' ratios (llama.cpp's step over
// splitspec's: above 1, splitspec is faster) and the pairs splitspec won. Built against a
// splitspec build tree and a llama.cpp build (bench/llamacpp/README.md).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/engine/backend.h"
#include "common/engine/model/llama_model.h"
#include "llama.h"

namespace {

using splitspec::engine::LlamaModel;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "paired_bench: %s\n", what.c_str());
  std::exit(1);
}

// splitspec's side: a model, one sequence prefilled to `context`, one decode step at a time.
class SplitspecDecoder {
 public:
  SplitspecDecoder(const std::string& dir, bool int8, int context, int steps) {
    splitspec::engine::CpuBackendOptions backend_options;
    backend_options.n_threads = omp_get_max_threads();
    backend_ = splitspec::engine::CreateCpuBackend(backend_options);
    splitspec::engine::ModelLoadOptions options;
    if (int8) options.quantize = splitspec::engine::WeightQuantization::kInt8;
    auto model = LlamaModel::Load(dir, *backend_, options);
    if (!model.ok()) Die(std::string(model.status().message()));
    model_ = std::move(*model);
    auto kv = model_->CreateKvCache((context + steps + 16) / 16 + 4, 16);
    if (!kv.ok()) Die(std::string(kv.status().message()));
    kv_ = std::move(*kv);
    if (!kv_->AddSequence(kSeq).ok()) Die("kv sequence");
    // The tokens step_bench and LlamaDecoder below feed: the same prompt, the same steps.
    const int vocab = model_->config().vocab_size;
    std::vector<int32_t> prompt(context);
    for (int i = 0; i < context; ++i) prompt[i] = (i * 7919 + 3) % vocab;
    Run({kSeq, prompt, {}, {}});
  }
  // One decode step, the step_bench's token of step `s`; seconds.
  double Step(int s) {
    const double start = Now();
    Run({kSeq, {(s * 31) % model_->config().vocab_size}, {}, {0}});
    return Now() - start;
  }
  int64_t weight_bytes() const { return model_->weight_bytes(); }

 private:
  static constexpr splitspec::engine::SeqId kSeq = 1;
  void Run(const splitspec::engine::SequenceStep& step) {
    splitspec::engine::ForwardResult result;
    if (absl::Status s = model_->Forward({step}, *kv_, &result); !s.ok()) Die(std::string(s.message()));
  }
  std::unique_ptr<splitspec::engine::Backend> backend_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<splitspec::engine::KvCache> kv_;
};

// llama.cpp's side, as step_bench.cpp.
class LlamaDecoder {
 public:
  LlamaDecoder(const char* gguf, int threads, int context, int steps) : context_(context) {
    llama_backend_init();
    model_ = llama_model_load_from_file(gguf, llama_model_default_params());
    if (model_ == nullptr) Die("llama.cpp could not load the model");
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = std::max(512, context + steps + 64);
    cp.n_batch = 128;
    cp.n_ubatch = 128;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.no_perf = true;
    ctx_ = llama_init_from_model(model_, cp);
    n_vocab_ = llama_vocab_n_tokens(llama_model_get_vocab(model_));
    batch_ = llama_batch_init(256, 0, 1);
    for (int pos0 = 0; pos0 < context; pos0 += 128) {
      const int n = std::min(128, context - pos0);
      Fill(n, pos0);
      if (llama_decode(ctx_, batch_) != 0) Die("llama.cpp prefill failed");
    }
  }
  ~LlamaDecoder() {
    llama_batch_free(batch_);
    llama_free(ctx_);
    llama_model_free(model_);
  }
  double Step(int s) {
    batch_.n_tokens = 1;
    batch_.token[0] = (s * 31) % n_vocab_;
    batch_.pos[0] = context_ + s;
    batch_.n_seq_id[0] = 1;
    batch_.seq_id[0][0] = 0;
    batch_.logits[0] = 1;
    const double start = Now();
    if (llama_decode(ctx_, batch_) != 0) Die("llama.cpp decode failed");
    llama_synchronize(ctx_);
    volatile float first = llama_get_logits_ith(ctx_, 0)[0];
    (void)first;
    return Now() - start;
  }

 private:
  void Fill(int n, int pos0) {
    batch_.n_tokens = n;
    for (int i = 0; i < n; ++i) {
      batch_.token[i] = ((pos0 + i) * 7919 + 3) % n_vocab_;
      batch_.pos[i] = pos0 + i;
      batch_.n_seq_id[i] = 1;
      batch_.seq_id[i][0] = 0;
      batch_.logits[i] = i == n - 1;
    }
  }
  int context_;
  llama_model* model_ = nullptr;
  llama_context* ctx_ = nullptr;
  llama_batch batch_{};
  int n_vocab_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  bool int8 = false;
  if (auto it = std::find(args.begin(), args.end(), "--quantize"); it != args.end() && it + 1 != args.end()) {
    if (it[1] != "int8") Die("--quantize takes int8");
    int8 = true;
    args.erase(it, it + 2);
  }
  if (args.size() < 2) {
    std::fprintf(stderr, "usage: paired_bench SPLITSPEC_MODEL_DIR MODEL.gguf [--quantize int8] [threads] [context] [steps]\n");
    return 2;
  }
  const int threads = args.size() > 2 ? std::atoi(args[2].c_str()) : 2;
  const int context = args.size() > 3 ? std::atoi(args[3].c_str()) : 64;
  const int steps = args.size() > 4 ? std::atoi(args[4].c_str()) : 40;
  if (threads < 1 || context < 1 || steps < 1) Die("threads, context and steps must be positive");
  omp_set_num_threads(threads);

  SplitspecDecoder ours(args[0], int8, context, steps);
  LlamaDecoder theirs(args[1].c_str(), threads, context, steps);
  std::vector<double> ours_s, theirs_s, ratios;
  int won = 0;
  for (int s = 0; s < steps + 2; ++s) {
    double a, b;
    if (s % 2 == 0) {
      a = ours.Step(s);
      b = theirs.Step(s);
    } else {
      b = theirs.Step(s);
      a = ours.Step(s);
    }
    if (s < 2) continue;
    ours_s.push_back(a);
    theirs_s.push_back(b);
    ratios.push_back(b / a);
    won += a < b;
  }
  const double ours_median = Median(ours_s), theirs_median = Median(theirs_s);
  std::printf("paired decode, %d threads, context %d, %d step pairs: splitspec %.3f ms (%.1f tok/s, weights read at "
              "%.1f GB/s), llama.cpp %.3f ms (%.1f tok/s); llama.cpp / splitspec step time, median of pairs %.2f "
              "(range %.2f-%.2f); splitspec faster in %d of %d pairs\n",
              threads, context, steps, ours_median * 1e3, 1.0 / ours_median, ours.weight_bytes() / ours_median / 1e9,
              theirs_median * 1e3, 1.0 / theirs_median, Median(ratios), *std::min_element(ratios.begin(), ratios.end()),
              *std::max_element(ratios.begin(), ratios.end()), won, steps);
  return 0;
}
