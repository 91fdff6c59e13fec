// llama.cpp step timing following splitspec bench-engine's protocol: prefill `context` tokens,
// then `steps`+2 single-token decodes with logits (context grows by one each), median of the
// last `steps`; and a 16-token forward (logits for all) at the same context, removed after
// each repeat, median of `steps`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "llama.h"

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int main(int argc, char** argv) {
  if (argc < 2) { std::fprintf(stderr, "usage: step_bench MODEL.gguf [threads] [context] [steps]\n"); return 2; }
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int context = argc > 3 ? std::atoi(argv[3]) : 64;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 16;
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) { std::fprintf(stderr, "load failed\n"); return 1; }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = std::max(512, context + steps + 64); cp.n_batch = 128; cp.n_ubatch = 128;
  cp.n_threads = threads; cp.n_threads_batch = threads;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  auto tok = [&](int i, int salt) { return (i * 7919 + salt * 104729 + 3) % n_vocab; };
  llama_batch batch = llama_batch_init(256, 0, 1);
  auto fill = [&](int n, int pos0, int salt, bool all_logits) {
    batch.n_tokens = n;
    for (int i = 0; i < n; ++i) {
      batch.token[i] = tok(pos0 + i, salt); batch.pos[i] = pos0 + i; batch.n_seq_id[i] = 1; batch.seq_id[i][0] = 0;
      batch.logits[i] = all_logits || i == n - 1;
    }
  };
  // The prefill in batches of at most n_batch tokens (a longer context is several calls).
  for (int pos0 = 0; pos0 < context; pos0 += 128) {
    const int n = std::min(128, context - pos0);
    fill(n, pos0, 0, false);
    if (llama_decode(ctx, batch)) { std::fprintf(stderr, "prefill failed\n"); return 1; }
  }
  std::vector<double> t1;
  for (int s = 0; s < steps + 2; ++s) {
    batch.n_tokens = 1; batch.token[0] = (s * 31) % n_vocab; batch.pos[0] = context + s;
    batch.n_seq_id[0] = 1; batch.seq_id[0][0] = 0; batch.logits[0] = 1;
    const double a = now();
    if (llama_decode(ctx, batch)) return 1;
    llama_synchronize(ctx);
    volatile float x = llama_get_logits_ith(ctx, 0)[0]; (void)x;
    if (s >= 2) t1.push_back(now() - a);
  }
  llama_memory_seq_rm(llama_get_memory(ctx), 0, context, -1);
  std::vector<double> t16;
  for (int r = 0; r < steps + 2; ++r) {
    fill(16, context, r, true);
    const double a = now();
    if (llama_decode(ctx, batch)) return 1;
    llama_synchronize(ctx);
    if (r >= 2) t16.push_back(now() - a);
    llama_memory_seq_rm(llama_get_memory(ctx), 0, context, -1);
  }
  std::sort(t1.begin(), t1.end()); std::sort(t16.begin(), t16.end());
  const double m1 = t1[t1.size() / 2], m16 = t16[t16.size() / 2];
  std::printf("llama.cpp %s threads %d context %d: decode %.3f ms (%.1f tok/s), 16-token forward %.3f ms (%.2fx)\n",
              argv[1], threads, context, m1 * 1e3, 1.0 / m1, m16 * 1e3, m16 / m1);
  llama_batch_free(batch); llama_free(ctx); llama_model_free(model);
  return 0;
}
